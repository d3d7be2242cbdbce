#pragma once
// Taking, renewing and giving back a lease of a team pool: acquire_core (sans-io) carried out against the
// records in storage (pool_store) with a timer for its waits and, when the pool may grow, a provider
// callback that makes a node. Renew and release are one record's read-modify-write, read again on a
// conflict.
//
// Trace: `ferry:pool:acquire` {tenant, slots, lease} -> node, conflicts, waits, holding the reads, the
// writes and each `ferry:pool:wait` {until}; `ferry:pool:renew` {node, lease} -> expires_at;
// `ferry:pool:release` {node, lease}.
#include "agent/pool/acquire_core.hpp"
#include "agent/pool/pool_store.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <string>

namespace ferry::agent::pool {

// Seconds since the epoch: the wall clock, which is what leases are compared against on every host.
using pool_clock = std::function<pool_time()>;
pool_time wall_clock_now();

// Makes a node for the pool, to be registered as `node_id`; the provider's work, so the lease code knows
// no provider. Empty: this agent cannot grow the pool (an acquire that would have to fails).
using node_maker =
    std::function<boost::asio::awaitable<result<new_node>>(tracing::action&, const std::string& node_id, diagnostics&)>;

struct acquire_settings {
  pool_limits limits;
  int max_conflicts = 8;          // conflicts in a row before the acquire gives up
  std::chrono::seconds max_wait{600};  // how long the acquire waits in all for a full pool to free a slot
};

// A lease of request.slots for request.ttl, or why not: the pool stayed full past max_wait (errc::pool_full),
// it can never fit the request (pool_cannot_fit), every write lost (pool_contended), or storage failed.
boost::asio::awaitable<result<held_lease>> acquire_lease(tracing::action& parent, pool_store& store,
                                                         const lease_request& request, const acquire_settings& settings,
                                                         const node_maker& make, const pool_clock& now,
                                                         diagnostics& diag);

// The lease with its expiry moved to now + ttl. errc::lease_lost when it expired (its slots may be someone
// else's now): the holder must stop using the node.
boost::asio::awaitable<result<held_lease>> renew_lease(tracing::action& parent, pool_store& store, held_lease held,
                                                       pool_time ttl, int max_conflicts, const pool_clock& now,
                                                       diagnostics& diag);

// The lease given back; nothing to do when it is gone already (it expired and someone dropped it).
boost::asio::awaitable<result<void>> release_lease(tracing::action& parent, pool_store& store, const held_lease& held,
                                                   int max_conflicts, const pool_clock& now, diagnostics& diag);

}  // namespace ferry::agent::pool
