// node_pool's nodes from a team pool (pool.name): leases instead of the registry's warm nodes.
#include "agent/provide/node_pool.hpp"

#include "agent/error.hpp"
#include "net/cancellation.hpp"
#include "net/digest.hpp"
#include "net/error.hpp"
#include "net/task_group.hpp"
#include "provision/make_provider.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace ferry::agent {

namespace asio = boost::asio;

namespace {

// A node that found gone is replaced by another lease; a pool whose nodes keep failing ends the slot here.
constexpr int max_replacements = 3;

// A login that failed because nothing answers there (the node stopped itself, or its machine went away),
// not because of what answered.
bool nothing_answers(const error_code& ec) {
  return ec == net::errc::connection_failed || ec == net::errc::timeout;
}

// The work, then a flag and a nudge to the renewal loop waiting beside it.
asio::awaitable<void> work_then_flag(node_work& work, ready_node& rn, bool& over, asio::steady_timer& timer) {
  co_await work(rn);
  over = true;
  timer.cancel();
}

}  // namespace

asio::awaitable<result<void>> node_pool::open_pool(tracing::action& act, diagnostics& diag) {
  if (pool_) co_return result<void>{};
  auto access = co_await open_pool_access(act, ctx_, *storage_, access_.ssh, diag);
  if (!access) co_return access.error();
  auto provider = provision::make_provider(ctx_.io, pool_node_settings(ctx_.config.values), access->public_key, diag);
  if (!provider) co_return provider.error();
  pool_.emplace(std::move(*access));
  pool_provider_ = std::move(*provider);
  maker_ = std::make_unique<pool_node_maker>(ctx_, *pool_, *pool_provider_, access_.readiness);
  co_return result<void>{};
}

asio::awaitable<void> node_pool::lease_nodes(round& r, std::size_t count, node_work& work) {
  diagnostics diag;
  if (auto opened = co_await open_pool(r.act, diag); !opened) {
    r.report->failed += count;
    r.report->failures.push_back(fmt::format("pool {}: {}", ctx_.config.values.pool.name, describe(opened.error(), diag)));
    for (std::size_t i = 0; i < count; ++i) r.one_done();
    co_return;
  }
  // Side by side: a slot that waits for room does not hold up the others.
  net::task_group slots(co_await asio::this_coro::executor);
  for (std::size_t i = 0; i < count; ++i) slots.spawn(lease_slot(r, work));
  co_await slots.wait(true);
}

asio::awaitable<result<pool::held_lease>> node_pool::acquire_one(round& r, diagnostics& diag) {
  // Named objects: GCC 12 destroys a braced temporary passed to a coroutine's by-value parameter twice.
  pool::lease_request request{net::random_hex(8), pool_->tenant, 1, pool_->ttl, pool_->holder, held_};
  const auto settings = pool_->acquire;
  const auto nodes = maker_->callbacks();
  const pool::pool_clock clock = pool::wall_clock_now;
  co_return co_await pool::acquire_lease(r.act, pool_->store, request, settings, nodes, clock, diag);
}

void node_pool::forget_held(const std::string& node_id) {
  if (auto it = std::find(held_.begin(), held_.end(), node_id); it != held_.end()) held_.erase(it);
}

asio::awaitable<void> node_pool::lease_slot(round& r, node_work& work) {
  auto& report = *r.report;
  const auto& pool_name = pool_->name;
  for (int attempt = 0; attempt <= max_replacements; ++attempt) {
    diagnostics diag;
    auto held = co_await acquire_one(r, diag);
    if (!held) {
      if (!co_await net::cancelled()) report.fail("pool " + pool_name, held.error(), diag);
      r.one_done();
      co_return;
    }
    // Two of the job's slots that raced to one node: the later one goes elsewhere.
    if (std::find(held_.begin(), held_.end(), held->node_id) != held_.end()) {
      co_await give_back(r.job, *held);
      continue;
    }
    held_.push_back(held->node_id);
    auto n = node_of_record(held->record, ctx_.config.values);
    auto act = r.act.child(action_types::provision::node,
                           {{"node", n.id}, {"pool_node", held->node_id}, {"lease", held->granted.id}});
    auto link = maker_->take_link(n.id);
    const bool made_here = link != nullptr;
    if (!link) {
      auto linked = co_await link_to(act, n, *held, diag);
      if (!linked) {
        act.fail(linked.error(), diag);
        const auto why = describe(linked.error(), diag);
        if (!co_await net::cancelled() && nothing_answers(linked.error())) {
          // Removed, its name is free for a new node; kept, it stays in held_ so that the next acquire
          // avoids it.
          if (co_await drop_if_gone(r.act, *held, n, why)) forget_held(held->node_id);
          continue;
        }
        forget_held(held->node_id);
        co_await give_back(r.job, *held);
        if (!co_await net::cancelled()) report.fail(n.id, linked.error(), diag);
        r.one_done();
        co_return;
      }
      link = std::move(*linked);
    }
    if (co_await net::cancelled()) {
      set_up_cancelled(r, act);
      link->close();
      forget_held(held->node_id);
      co_await give_back(r.job, *held);
      co_return;
    }
    act.succeed({{"warm", !made_here}});
    ++(made_here ? report.created : report.warm);
    note_ready(report);
    r.one_done();
    ready_node rn{std::move(n), std::move(link), !made_here};
    co_await work_under_lease(r, rn, std::move(*held), work);
    if (rn.link) rn.link->close();
    co_return;
  }
  diagnostics d;
  d.set(fmt::format("{} nodes of the pool in a row did not answer", max_replacements + 1));
  report.fail("pool " + pool_name, make_error_code(errc::pool_cannot_grow), d);
  r.one_done();
}

asio::awaitable<result<std::shared_ptr<net::node_link>>> node_pool::link_to(tracing::action& act,
                                                                            const provision::node& n,
                                                                            const pool::held_lease& held,
                                                                            diagnostics& diag) {
  if (auto pinned = pin_host_key(*pool_, n.id, held.record.host_key, diag); !pinned) co_return pinned.error();
  co_return co_await connect_node_with(act, n, pool_->ssh, diag);
}

asio::awaitable<void> node_pool::work_under_lease(round& r, ready_node& rn, pool::held_lease held, node_work& work) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  bool over = false, lost = false;
  net::task_group group(ex);
  group.spawn(work_then_flag(work, rn, over, timer));
  const pool::pool_clock clock = pool::wall_clock_now;
  while (!over) {
    timer.expires_after(std::chrono::seconds(pool_->renew_every));
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (over || co_await net::cancelled()) break;  // cancelled: the wait below hands it to the work
    diagnostics d;
    auto renewed = co_await pool::renew_lease(r.job, pool_->store, held, pool_->ttl, pool_->acquire.max_conflicts,
                                              clock, d);
    if (renewed) {
      held = std::move(*renewed);
      continue;
    }
    // Storage that fails for a while costs nothing until the lease would have expired; then the slots may
    // be someone else's, and the work must stop.
    if (renewed.error() == errc::lease_lost || clock() >= held.granted.expires_at) {
      lost = true;
      r.job.log(action_types::pool::lease_lost, {{"node", rn.node.id}, {"lease", held.granted.id}, {"reason", d.message}});
      fmt::print(stderr, "ferry: {}: the pool lease was lost ({}): its work is stopped\n", rn.node.id, d.message);
      group.cancel();
      break;
    }
  }
  co_await group.wait(true);
  forget_held(held.node_id);
  if (!lost) co_await give_back(r.job, held);
}

asio::awaitable<void> node_pool::give_back(tracing::action& act, const pool::held_lease& held) {
  diagnostics d;
  const pool::pool_clock clock = pool::wall_clock_now;
  // Given back even after Ctrl-C: the request's own deadlines bound it. A lease not given back expires.
  (void)co_await net::shielded(pool::release_lease(act, pool_->store, held, pool_->acquire.max_conflicts, clock, d));
}

asio::awaitable<bool> node_pool::drop_if_gone(tracing::action& act, const pool::held_lease& held,
                                              const provision::node& n, const std::string& reason) {
  diagnostics d;
  auto fresh = co_await pool_->store.read_one(act, held.node_id, d);
  if (!fresh) co_return false;
  // Gone from the pool already (another agent found it first): its name is free.
  if (!*fresh) co_return true;
  if ((*fresh)->record.provider_id != held.record.provider_id) co_return false;
  const auto& record = (*fresh)->record;
  bool gone = false;
  if (record.provider == pool_provider_->name()) {
    diagnostics dd;
    if (auto state = co_await pool_provider_->describe(act, n, dd); state)
      gone = state->state == provision::node_state::stopped || state->state == provision::node_state::terminated;
  }
  if (!gone) {
    // Nobody else holds it: an idle node that stopped itself. Another's lease says someone uses it.
    const auto now = pool::wall_clock_now();
    gone = std::none_of(record.leases.begin(), record.leases.end(), [&](const pool::lease& l) {
      return l.id != held.granted.id && !l.expired(now);
    });
  }
  if (!gone) co_return false;
  auto removed = co_await pool_->store.remove(act, **fresh, d);
  if (!removed) co_return false;
  act.log(action_types::pool::node_left, {{"node", held.node_id}, {"provider_id", record.provider_id}, {"reason", reason}});
  co_return true;
}

}  // namespace ferry::agent
