#include "agent/provide/pool_admin.hpp"

#include "agent/error.hpp"
#include "agent/provide/pool_access.hpp"
#include "agent/provide/pool_node_maker.hpp"
#include "net/digest.hpp"
#include "provision/make_provider.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace ferry::agent {

namespace asio = boost::asio;

namespace {

// What one pool command works with: the pool and a provider that makes its nodes.
struct pool_admin {
  pool_access pool;
  std::unique_ptr<provision::provider> provider;
};

asio::awaitable<result<pool_admin>> open_admin(tracing::action& act, const command_context& ctx, net::s3_client& s3,
                                               node_access& access, diagnostics& diag) {
  auto pool = co_await open_pool_access(act, ctx, s3, access.ssh, diag);
  if (!pool) co_return pool.error();
  auto provider = provision::make_provider(ctx.io, pool_node_settings(ctx.config.values), pool->public_key, diag);
  if (!provider) co_return provider.error();
  co_return pool_admin{std::move(*pool), std::move(*provider)};
}

std::vector<std::string> names_of(const pool::pool_snapshot& s) {
  std::vector<std::string> out;
  for (const auto& e : s.nodes) out.push_back(e.record.node_id);
  for (const auto& u : s.unreadable) out.push_back(u);
  return out;
}

}  // namespace

asio::awaitable<result<pool_up_report>> pool_up(tracing::action& parent, const command_context& ctx,
                                                net::s3_client& s3, node_access& access, diagnostics& diag) {
  const auto& s = ctx.config.values;
  auto act = parent.child(action_types::pool::up, {{"pool", s.pool.name}, {"min_nodes", s.pool.min_nodes}});
  auto admin = co_await open_admin(act, ctx, s3, access, diag);
  if (!admin) {
    act.fail(admin.error(), diag);
    co_return admin.error();
  }
  auto& pool = admin->pool;
  pool_node_maker maker(ctx, pool, *admin->provider, access.readiness);
  pool_up_report report;
  const pool::pool_clock clock = pool::wall_clock_now;
  for (;;) {
    auto snapshot = co_await pool.store.read(act, diag);
    if (!snapshot) {
      act.fail(snapshot.error(), diag);
      co_return snapshot.error();
    }
    report.nodes = snapshot->size();
    if (static_cast<int>(snapshot->size()) >= s.pool.min_nodes) break;
    // A lease no node there may take: the acquire makes a node. Named objects: GCC 12 destroys a braced
    // temporary passed to a coroutine's by-value parameter twice.
    pool::lease_request request{net::random_hex(8), pool.tenant, 1, pool.ttl, pool.holder, names_of(*snapshot)};
    const auto settings = pool.acquire;
    const auto nodes = maker.callbacks();
    auto held = co_await pool::acquire_lease(act, pool.store, request, settings, nodes, clock, diag);
    if (!held) {
      act.fail(held.error(), diag);
      co_return held.error();
    }
    if (auto link = maker.take_link(held->record.provider_id)) link->close();
    ++report.made;
    diagnostics d;
    (void)co_await pool::release_lease(act, pool.store, *held, pool.acquire.max_conflicts, clock, d);
  }
  act.succeed({{"nodes", report.nodes}, {"made", report.made}});
  co_return report;
}

asio::awaitable<result<pool_down_report>> pool_down(tracing::action& parent, const command_context& ctx,
                                                    net::s3_client& s3, node_access& access, bool force,
                                                    diagnostics& diag) {
  const auto& s = ctx.config.values;
  auto act = parent.child(action_types::pool::down, {{"pool", s.pool.name}, {"force", force}});
  auto admin = co_await open_admin(act, ctx, s3, access, diag);
  if (!admin) {
    act.fail(admin.error(), diag);
    co_return admin.error();
  }
  auto& pool = admin->pool;
  auto& provider = *admin->provider;
  auto snapshot = co_await pool.store.read(act, diag);
  if (!snapshot) {
    act.fail(snapshot.error(), diag);
    co_return snapshot.error();
  }
  auto listed = co_await provider.list(act, diag);
  if (!listed) {
    act.fail(listed.error(), diag);
    co_return listed.error();
  }
  std::set<std::string> ours;
  for (const auto& n : *listed) ours.insert(n.id);
  pool_down_report report;
  const auto now = pool::wall_clock_now();
  for (const auto& e : snapshot->nodes) {
    const auto& r = e.record;
    if (r.provider != provider.name() || !ours.contains(r.provider_id)) {
      report.kept.push_back(fmt::format("{}: {} node {} made by {}: not this agent's to end", r.node_id, r.provider,
                                        r.provider_id, r.created_by));
      continue;
    }
    if (pool::busy(r, now) && !force) {
      report.kept.push_back(fmt::format("{}: {} slot(s) leased (--force ends it all the same)", r.node_id,
                                        pool::used_slots(r, now)));
      continue;
    }
    // Out of the pool first: once the record is gone nobody leases the node, and one leased meanwhile
    // fails the If-Match and stays.
    diagnostics d;
    if (auto removed = co_await pool.store.remove(act, e, d); !removed) {
      report.kept.push_back(fmt::format("{}: {}", r.node_id, describe(removed.error(), d)));
      continue;
    }
    auto n = node_of_record(r, s);
    if (auto ended = co_await provider.terminate(act, n, d); !ended) {
      report.kept.push_back(fmt::format("{}: out of the pool, but {} could not end {}: {}", r.node_id, provider.name(),
                                        r.provider_id, describe(ended.error(), d)));
      continue;
    }
    report.ended.push_back(r.node_id);
  }
  for (const auto& u : snapshot->unreadable)
    report.kept.push_back(fmt::format("{}: its record breaks the pool's rules", u));
  if (report.kept.empty()) {
    diagnostics d;
    auto gone = co_await s3.delete_object(act, pool.store.where().bucket, pool.store.where().ssh_key(),
                                          net::write_condition::none(), d);
    report.key_removed = static_cast<bool>(gone);
  }
  act.succeed({{"ended", report.ended.size()}, {"kept", report.kept.size()}});
  co_return report;
}

}  // namespace ferry::agent
