#include "agent/provide/node_pool.hpp"

#include "agent/provide/node_end.hpp"
#include "agent/provide/node_watchdog.hpp"
#include "agent/provide/warm_nodes.hpp"

#include "net/cancellation.hpp"
#include "net/error.hpp"
#include "net/run_all.hpp"
#include "provision/readiness.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace ferry::agent {

namespace asio = boost::asio;

namespace {

std::int64_t now_seconds() { return static_cast<std::int64_t>(std::time(nullptr)); }

// Running nodes of this provider, most recently used first: the warmest caches.
std::vector<provision::node> warm_candidates(std::vector<provision::node> all, std::string_view provider,
                                             const std::vector<std::string>& taken) {
  std::vector<provision::node> out;
  for (auto& n : all) {
    if (n.provider != provider || n.state != provision::node_state::running) continue;
    if (std::find(taken.begin(), taken.end(), n.id) != taken.end()) continue;
    out.push_back(std::move(n));
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::max(a.last_used_at, a.created_at) > std::max(b.last_used_at, b.created_at);
  });
  return out;
}

// A node that could not be ended costs until someone ends it: said on stderr whatever the job's outcome.
void warn_orphaned(const provision::node& n, const error_code& ec, const diagnostics& diag) {
  fmt::print(stderr, "ferry: warning: {}: could not end it: {}\n", n.id, describe(ec, diag));
}

}  // namespace

void provision_report::fail(const std::string& id, const error_code& ec, const diagnostics& diag) {
  ++failed;
  failures.push_back(fmt::format("{}: {}", id, describe(ec, diag)));
}


node_pool::node_pool(const command_context& ctx, node_access& access, provision::provider& provider)
    : ctx_(ctx), access_(access), provider_(provider), start_(std::chrono::steady_clock::now()) {}

// A node whose set-up the caller's cancellation reached (its watchdog's install, a registry write) is not
// handed over: the work would start on it as if nothing had happened, since Asio hands a cancellation only
// to the operation in flight when it comes. It stays recorded as it is, ready for a later job.
// (A plain function, called once net::cancelled() said so: GCC 12 built a coroutine that took these
// references inside an if's condition with a frame that read `act` from the wrong place.)
void node_pool::set_up_cancelled(round& r, tracing::action& act) {
  act.fail(asio::error::operation_aborted, "cancelled");
  r.one_done();
}

void node_pool::note_ready(provision_report& report) {
  report.until_ready = std::chrono::steady_clock::now() - start_;
}

asio::awaitable<void> node_pool::mark_used(tracing::action& act, provision::node& n) {
  n.last_used_at = now_seconds();
  diagnostics d;
  (void)co_await access_.registry.update(act, n, d);
}

asio::awaitable<void> node_pool::join_warm_pool(tracing::action& act, provision::node& n, net::node_link& link) {
  const auto& s = ctx_.config.values;
  diagnostics d;
  if (auto all = access_.registry.load(d)) {
    const auto pinned = warm_nodes(*all, provider_.name(), s.nodes.min_nodes);
    if (std::find(pinned.begin(), pinned.end(), n.id) != pinned.end()) {
      pin(n);
      co_return;
    }
  }
  const auto settings = watchdog_settings::from(s);
  const auto stop = provider_.self_stop_command(n);
  if (!settings.enabled() || stop.empty()) co_return;
  if (auto installed = co_await install_watchdog(act, link, n, stop, settings, d); installed) {
    note_watchdog(n, &settings);
  } else if (!co_await net::cancelled()) {
    // The node works without it; it just will not stop itself. Said in the trace, not fatal to the job.
    // (Cancelled, the install is no failure of the node: the caller sees the cancellation itself.)
    act.log(action_types::provision::watchdog_failed, {{"node", n.id}, {"reason", describe(installed.error(), d)}});
  }
}

asio::awaitable<provision_report> node_pool::run_on_nodes(tracing::action& job, std::size_t count, node_work work) {
  start_ = std::chrono::steady_clock::now();
  co_return co_await add_nodes(job, count, std::move(work));
}

asio::awaitable<provision_report> node_pool::add_nodes(tracing::action& job, std::size_t count, node_work work) {
  provision_report report;
  round r{job.child(action_types::provision::round,
                    {{"count", count}, {"provider", pooled() ? "pool" : provider_.name()}}),
          job, count, &report};
  if (pooled()) {
    co_await lease_nodes(r, count, work);
    if (!r.act.finished())
      r.act.succeed({{"warm", report.warm}, {"created", report.created}, {"failed", report.failed}});
    co_return report;
  }
  diagnostics diag;
  auto registry = access_.registry.load(diag);
  std::vector<provision::node> warm;
  if (registry) warm = warm_candidates(std::move(*registry), provider_.name(), taken_);
  if (warm.size() > count) warm.resize(count);
  for (const auto& n : warm) taken_.push_back(n.id);

  std::vector<asio::awaitable<void>> tasks;
  for (auto& n : warm) tasks.push_back(take_warm(r, n, work));
  if (count > warm.size()) tasks.push_back(make_new(r, count - warm.size(), work));
  co_await net::run_all(std::move(tasks));
  if (!r.act.finished()) r.act.succeed({{"warm", report.warm}, {"created", report.created}, {"failed", report.failed}});
  co_return report;
}

asio::awaitable<void> node_pool::take_warm(round& r, provision::node n, node_work& work) {
  auto& report = *r.report;
  auto act = r.act.child(action_types::provision::node, {{"node", n.id}, {"warm", true}});
  diagnostics diag;
  auto link = co_await connect_node(act, n, access_, diag);
  if (!link) {
    act.fail(link.error(), diag);
    const bool stop = co_await net::cancelled();
    if (stop || link.error() == net::errc::host_key_changed) {
      // Another host key is not a node that went away: it may be someone else's machine at that address.
      // It is neither used nor ended nor replaced; the user decides (`ferry nodes down` ends it).
      if (!stop) report.fail(n.id, link.error(), diag);
      r.one_done();
      co_return;
    }
    // A warm node that does not answer is gone (it stopped itself when idle, or its machine went away):
    // end what is left of it and make another in its place.
    r.act.log(action_types::provision::replace, {{"node", n.id}, {"reason", describe(link.error(), diag)}});
    diagnostics d;
    if (auto ended = co_await end_node(r.act, provider_, access_.registry, n, d); !ended)
      warn_orphaned(n, ended.error(), d);
    co_await make_new(r, 1, work);
    co_return;
  }
  co_await mark_used(act, n);
  if (co_await net::cancelled()) {
    set_up_cancelled(r, act);
    (*link)->close();
    co_return;
  }
  act.succeed();
  ++report.warm;
  note_ready(report);
  r.one_done();
  ready_node rn{std::move(n), std::move(*link), true};
  co_await work(rn);
  if (rn.link) rn.link->close();
}

asio::awaitable<void> node_pool::make_new(round& r, std::size_t count, node_work& work) {
  auto& report = *r.report;
  auto create = r.act.child(action_types::provision::create, {{"count", count}, {"provider", provider_.name()}});
  diagnostics diag;
  // No node is made that the registry could not record: it would never be ended.
  std::string notice;
  auto usable = co_await access_.registry.ensure_usable(create, notice, diag);
  if (!notice.empty()) fmt::print(stderr, "ferry: warning: {}\n", notice);
  provision::node_spec spec;
  spec.count = static_cast<int>(count);
  if (!usable) {
    fail_create(r, create, count, usable.error(), diag);
    co_return;
  }
  auto created = co_await provider_.create(create, spec, diag);
  if (!created) {
    fail_create(r, create, count, created.error(), diag);
    co_return;
  }
  for (auto& n : *created) taken_.push_back(n.id);
  if (auto recorded = co_await record_all(create, *created, diag); !recorded) {
    // A node the registry does not hold would never be ended: none of them is kept.
    for (auto& n : *created) {
      diagnostics d;
      if (auto ended = co_await provider_.terminate(r.act, n, d); !ended)
        report.failures.push_back(fmt::format("{}: {} (it was never recorded: end it through {})", n.id,
                                              describe(ended.error(), d), provider_.name()));
    }
    fail_create(r, create, count, recorded.error(), diag);
    co_return;
  }
  create.succeed({{"nodes", created->size()}});
  // A provider that made fewer nodes than asked leaves the rest of the round to nobody.
  for (std::size_t i = created->size(); i < count; ++i) r.one_done();
  std::vector<asio::awaitable<void>> tasks;
  for (auto& n : *created) tasks.push_back(ready_new(r, n, work));
  co_await net::run_all(std::move(tasks));
}

void node_pool::fail_create(round& r, tracing::action& create, std::size_t count, const error_code& ec,
                            const diagnostics& diag) {
  create.fail(ec, diag);
  r.report->failed += count;
  r.report->failures.push_back(fmt::format("{}: {}", provider_.name(), describe(ec, diag)));
  for (std::size_t i = 0; i < count; ++i) r.one_done();
}

asio::awaitable<result<void>> node_pool::record_all(tracing::action& act, const std::vector<provision::node>& nodes,
                                                   diagnostics& diag) {
  const provision::node_registry::change add = [&nodes](std::vector<provision::node>& list, diagnostics&) {
    for (const auto& n : nodes) {
      std::erase_if(list, [&n](const provision::node& o) { return o.id == n.id; });
      list.push_back(n);
    }
    return error_code{};
  };
  co_return co_await access_.registry.modify(act, action_types::registry::add, add, diag);
}

asio::awaitable<void> node_pool::ready_new(round& r, provision::node n, node_work& work) {
  auto& report = *r.report;
  auto act = r.act.child(action_types::provision::node, {{"node", n.id}, {"warm", false}});
  diagnostics diag;
  std::shared_ptr<net::node_link> link;
  const auto login = ssh_login_check(access_.ssh, &link);
  auto ready = co_await provision::wait_ready(act, provider_, n, login, access_.readiness, diag);
  if (!ready || !link) {
    const error_code ec = ready ? error_code(net::errc::session_closed) : ready.error();
    act.fail(ec, diag);
    ++report.failed;
    report.failures.push_back(fmt::format("{}: {}", n.id, describe(ec, diag)));
    // A node that never became ready is of no use to anyone later: end it now.
    diagnostics d;
    if (auto ended = co_await end_node(r.act, provider_, access_.registry, n, d); !ended)
      warn_orphaned(n, ended.error(), d);
    r.one_done();
    co_return;
  }
  n = std::move(*ready);
  n.state = provision::node_state::running;
  // Recorded as running before it asks the warm pool: nodes that come up together then each see the
  // others, and agree on which of them nodes.min_nodes pins. The second write keeps what joining added.
  co_await mark_used(act, n);
  co_await join_warm_pool(act, n, *link);
  co_await mark_used(act, n);
  if (co_await net::cancelled()) {
    set_up_cancelled(r, act);
    link->close();
    co_return;
  }
  act.succeed();
  ++report.created;
  note_ready(report);
  r.one_done();
  ready_node rn{std::move(n), std::move(link), false};
  co_await work(rn);
  if (rn.link) rn.link->close();
}

}  // namespace ferry::agent
