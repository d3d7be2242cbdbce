#pragma once
// Starting and ending a team's pool as a whole (`ferry pool up`, `ferry pool down`).
//
// Up: the pool grows to pool.min_nodes nodes, one at a time, each made through a lease that no existing node
// can take (so the acquire makes a node) and given back at once; the first min_nodes names get no idle
// watchdog, so they stay (pool_node_maker.hpp).
//
// Down: each node that holds no live lease is first taken out of the pool (its record deleted with If-Match
// on the ETag read, so a lease taken meanwhile keeps it), then ended by this agent's provider, which must
// list it: a node another tenant made on its own machine (a local node) is not this agent's to end and
// stays, named. A node with live leases stays unless forced. When no record is left, the pool's key goes.
//
// Trace: `ferry:pool:up` {pool, min_nodes} -> nodes, made; `ferry:pool:down` {pool, force} -> ended, kept.
#include "agent/cli/command_context.hpp"
#include "agent/provide/node_access.hpp"
#include "net/s3_client.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <vector>

namespace ferry::agent {

struct pool_up_report {
  std::size_t nodes = 0;  // in the pool afterwards
  std::size_t made = 0;
};

boost::asio::awaitable<result<pool_up_report>> pool_up(tracing::action& parent, const command_context& ctx,
                                                       net::s3_client& s3, node_access& access, diagnostics& diag);

struct pool_down_report {
  std::vector<std::string> ended;  // node names
  std::vector<std::string> kept;   // "node-001: why"
  bool key_removed = false;
};

boost::asio::awaitable<result<pool_down_report>> pool_down(tracing::action& parent, const command_context& ctx,
                                                           net::s3_client& s3, node_access& access, bool force,
                                                           diagnostics& diag);

}  // namespace ferry::agent
