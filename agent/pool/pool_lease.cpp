#include "agent/pool/pool_lease.hpp"

#include "agent/error.hpp"
#include "net/cancellation.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>

namespace ferry::agent::pool {
namespace {

namespace asio = boost::asio;

// A timer for `seconds`; false when cancelled.
asio::awaitable<bool> sleep_for(pool_time seconds) {
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::seconds(std::max<pool_time>(0, seconds)));
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

// Whether a conditional write failed because the record changed: another agent wrote (or removed) it
// first, or our own earlier attempt landed. If-Match on a record removed since it was read is no_such_key.
bool changed_under_us(const error_code& ec) {
  return ec == net::errc::precondition_failed || ec == net::errc::no_such_key;
}

// The write a change makes of a record as last read (none: nothing to write), or why it cannot.
using change_fn = std::function<result<std::optional<record_write>>(const pool_entry&)>;

struct rewritten {
  pool_record record;
  std::string etag;
  int conflicts = 0;
};

// One record's read-modify-write: `change` is written with If-Match on the ETag the record was known at;
// on a conflict the record is read again and changed again, up to max_conflicts times in all. None when
// the change wants no write, or the record is gone.
asio::awaitable<result<std::optional<rewritten>>> rewrite_record(tracing::action& act, pool_store& store,
                                                                 pool_entry entry, int max_conflicts,
                                                                 const change_fn& change, diagnostics& diag) {
  using out = std::optional<rewritten>;
  for (int conflicts = 0;; ++conflicts) {
    auto w = change(entry);
    if (!w) co_return w.error();
    if (!*w) co_return out{};
    auto etag = co_await store.write(act, **w, diag);
    if (etag) co_return out(rewritten{std::move((*w)->record), std::move(*etag), conflicts});
    if (!changed_under_us(etag.error()) || conflicts + 1 >= std::max(1, max_conflicts)) co_return etag.error();
    auto fresh = co_await store.read_one(act, entry.record.node_id, diag);
    if (!fresh) co_return fresh.error();
    if (!*fresh) co_return out{};
    entry = std::move(**fresh);
  }
}

// A node made for the acquire that did not join the pool is ended, as nobody else knows of it. Not when
// its first record's write may have landed (the write's outcome is unknown): then it may be in the pool,
// where it idles out like any other; the trace names it.
asio::awaitable<void> end_made_node(tracing::action& act, const acquire_core& core, const pool_nodes& nodes) {
  const auto& made = core.made_node();
  if (!made) co_return;
  if (core.write_unsure() || !nodes.end) {
    act.log(action_types::pool::unregistered_node, {{"provider_id", made->provider_id}, {"address", made->address}});
    co_return;
  }
  diagnostics d;
  if (auto ended = co_await nodes.end(act, *made, d); !ended)
    act.log(action_types::pool::unregistered_node,
            {{"provider_id", made->provider_id}, {"address", made->address}, {"reason", d.message}});
}

// One step of the core carried out, its outcome reported back.
class acquire_shell {
 public:
  acquire_shell(tracing::action& act, pool_store& store, acquire_core& core, const acquire_settings& s,
                const pool_nodes& nodes, const pool_clock& now)
      : act_(act), store_(store), core_(core), settings_(s), nodes_(nodes), now_(now), deadline_(now() + s.max_wait.count()) {}

  // False when the acquire must end here without the core: the pool stayed full until the deadline.
  asio::awaitable<bool> step() {
    const auto a = core_.next();
    diagnostics d;
    switch (a.what) {
      case acquire_action::kind::read_pool: {
        auto snapshot = co_await store_.read(act_, d);
        if (snapshot)
          core_.pool_read(std::move(*snapshot), now_());
        else
          core_.read_failed(snapshot.error(), std::move(d));
        break;
      }
      case acquire_action::kind::write_record: {
        auto etag = co_await store_.write(act_, *a.write, d);
        if (etag)
          core_.written(std::move(*etag));
        else if (changed_under_us(etag.error()))
          core_.write_conflict();
        else
          core_.write_failed(etag.error(), std::move(d));
        break;
      }
      case acquire_action::kind::create_node: {
        if (!nodes_.make) {
          d.set(fmt::format("the pool has room for node {} and this command cannot make nodes", a.node_id));
          core_.node_failed(make_error_code(errc::pool_cannot_grow), std::move(d));
          break;
        }
        auto made = co_await nodes_.make(act_, a.node_id, d);
        if (made)
          core_.node_made(std::move(*made), now_());
        else
          core_.node_failed(made.error(), std::move(d));
        break;
      }
      case acquire_action::kind::wait_until: {
        // Read again at the first of: when room may come back, the next poll, the deadline.
        const auto now = now_();
        if (now >= deadline_) co_return false;
        const auto until = std::min({a.until, now + std::max<pool_time>(1, settings_.poll.count()), deadline_});
        auto wait = act_.child(action_types::pool::wait, {{"until", until}});
        if (co_await sleep_for(until - now)) {
          wait.succeed();
          core_.waited();
        } else {
          wait.fail(acquire_core::cancellation_error(), "cancelled");
          core_.cancelled(net::cancel_kind::total);
        }
        break;
      }
      case acquire_action::kind::finish:
        break;
    }
    co_return true;
  }

 private:
  tracing::action& act_;
  pool_store& store_;
  acquire_core& core_;
  const acquire_settings& settings_;
  const pool_nodes& nodes_;
  const pool_clock& now_;
  pool_time deadline_;
};

}  // namespace

pool_time wall_clock_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

asio::awaitable<result<held_lease>> acquire_lease(tracing::action& parent, pool_store& store, lease_request request,
                                                  acquire_settings settings, pool_nodes nodes, pool_clock now,
                                                  diagnostics& diag) {
  auto act = parent.child(action_types::pool::acquire,
                          {{"tenant", request.tenant}, {"slots", request.slots}, {"lease", request.lease_id}});
  acquire_core core(request, settings.limits, settings.max_conflicts);
  acquire_shell shell(act, store, core, settings, nodes, now);
  bool full = false;
  while (!core.done()) {
    if (co_await net::cancelled()) {
      core.cancelled(net::cancel_kind::total);
      break;
    }
    if (!co_await shell.step()) {
      full = true;
      core.cancelled(net::cancel_kind::total);  // ends it: a wait has nothing outstanding
    }
  }
  co_await end_made_node(act, core, nodes);
  const int conflicts = core.conflicts(), waits = core.waits();
  if (full) {
    diag.set(fmt::format("pool {}: no room for {} slot(s) of tenant {} within {} s: the pool (or the tenant's share "
                         "of it) stayed full",
                         store.where().prefix, request.slots, request.tenant, settings.max_wait.count()));
    act.fail(make_error_code(errc::pool_full), diag, {{"conflicts", conflicts}, {"waits", waits}});
    co_return make_error_code(errc::pool_full);
  }
  if (!core.held()) {
    diag = core.failure_diagnostics();
    act.fail(core.failure(), diag, {{"conflicts", conflicts}, {"waits", waits}});
    co_return core.failure();
  }
  auto out = *core.held();
  act.succeed({{"node", out.node_id}, {"joined", core.joined()}, {"conflicts", conflicts}, {"waits", waits}});
  co_return out;
}

asio::awaitable<result<held_lease>> renew_lease(tracing::action& parent, pool_store& store, held_lease held,
                                                pool_time ttl, int max_conflicts, pool_clock now, diagnostics& diag) {
  auto act = parent.child(action_types::pool::renew, {{"node", held.node_id}, {"lease", held.granted.id}});
  const change_fn change = [&](const pool_entry& e) -> result<std::optional<record_write>> {
    auto w = renew(e, held.granted.id, now(), ttl, diag);
    if (!w) return w.error();
    return std::optional<record_write>(std::move(*w));
  };
  // A named entry: GCC 12 frees a braced temporary passed to a coroutine's by-value parameter twice.
  pool_entry known{held.record, held.etag};
  auto written = co_await rewrite_record(act, store, known, max_conflicts, change, diag);
  if (written && !*written) {  // the record is gone: the node left the pool, and the lease with it
    diag.set(fmt::format("node {} left the pool: lease {} is lost", held.node_id, held.granted.id));
    written = make_error_code(errc::lease_lost);
  }
  if (!written) {
    act.fail(written.error(), diag);
    co_return written.error();
  }
  held.record = std::move((*written)->record);
  held.etag = std::move((*written)->etag);
  if (const auto* l = find_lease(held.record, held.granted.id)) held.granted = *l;
  act.succeed({{"expires_at", held.granted.expires_at}, {"conflicts", (*written)->conflicts}});
  co_return held;
}

asio::awaitable<result<void>> release_lease(tracing::action& parent, pool_store& store, held_lease held,
                                            int max_conflicts, pool_clock now, diagnostics& diag) {
  auto act = parent.child(action_types::pool::release, {{"node", held.node_id}, {"lease", held.granted.id}});
  // No write when the lease is gone already: it expired and another write dropped it.
  const change_fn change = [&](const pool_entry& e) -> result<std::optional<record_write>> {
    return release(e, held.granted.id, now());
  };
  // A named entry: GCC 12 frees a braced temporary passed to a coroutine's by-value parameter twice.
  pool_entry known{held.record, held.etag};
  auto written = co_await rewrite_record(act, store, known, max_conflicts, change, diag);
  if (!written) {
    act.fail(written.error(), diag);
    co_return written.error();
  }
  act.succeed({{"gone", !*written}});
  co_return result<void>{};
}

}  // namespace ferry::agent::pool
