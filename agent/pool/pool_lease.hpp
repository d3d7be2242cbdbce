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

// How the pool gets and ends nodes: the provider's work, so the lease code knows no provider. `make` makes
// a node to be registered as `node_id`; `end` ends one that was made for an acquire and never joined the
// pool. Empty `make`: this command cannot grow the pool (an acquire that would have to fails).
struct pool_nodes {
  std::function<boost::asio::awaitable<result<new_node>>(tracing::action&, const std::string& node_id, diagnostics&)>
      make;
  std::function<boost::asio::awaitable<result<void>>(tracing::action&, const new_node&, diagnostics&)> end;
};

// The functions below are coroutines that take their arguments by value, so that nothing they hold
// dangles. Pass named objects, not braced temporaries: GCC 12 destroys a braced temporary passed to a
// coroutine's by-value parameter twice.

// The caller's limits and deadlines (its configuration's).
struct acquire_settings {
  pool_limits limits;
  int max_conflicts = 0;       // conflicts in a row before the acquire gives up (at least 1)
  std::chrono::seconds max_wait{};  // how long the acquire waits in all for room in a full pool
  std::chrono::seconds poll{};      // how long one wait lasts at most before the pool is read again: a
                                    // lease given back early frees its slots before any expiry says so
};

// A lease of request.slots for request.ttl, or why not: the pool stayed full past max_wait
// (errc::pool_full), it can never fit the request (pool_cannot_fit), it needs a node and `nodes` cannot make
// one (pool_cannot_grow), every write lost (pool_contended), or storage failed. A write that failed to
// say whether it landed (a transport error, a cancellation) leaves a lease that expires by itself.
boost::asio::awaitable<result<held_lease>> acquire_lease(tracing::action& parent, pool_store& store,
                                                         lease_request request, acquire_settings settings,
                                                         pool_nodes nodes, pool_clock now, diagnostics& diag);

// The lease with its expiry moved to now + ttl. errc::lease_lost when it expired or its node left the pool
// (its slots may be someone else's now): the holder must stop using the node.
boost::asio::awaitable<result<held_lease>> renew_lease(tracing::action& parent, pool_store& store, held_lease held,
                                                       pool_time ttl, int max_conflicts, pool_clock now,
                                                       diagnostics& diag);

// The lease given back; nothing to do when it is gone already (it expired and someone dropped it).
boost::asio::awaitable<result<void>> release_lease(tracing::action& parent, pool_store& store, held_lease held,
                                                   int max_conflicts, pool_clock now, diagnostics& diag);

}  // namespace ferry::agent::pool
