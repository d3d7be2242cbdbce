#pragma once
// What a team's pool did, from the traces of the agents that leased from it (`ferry pool stats`): per
// tenant and for the whole pool, the waits for a slot, the acquires that got nothing, the slot-hours
// leased, the node-hours the pool's nodes ran and how much of them the leases used. Deterministic and
// without I/O: the traces in, the figures out.
//
// Read from the trace (tracing/action_types.hpp, pool):
//   ferry:pool:acquire    a wait for a slot, from its start to its end; one that failed (pool_full,
//                         contended, cancelled) got nothing; one without an end (the agent was killed)
//                         lasts until its parent's end, or its task's last message, and is `unfinished`.
//                         A succeeded one starts a lease of `slots` on `node` at its end.
//   ferry:pool:release    ends the lease it names at its end. A lease never given back in the traces ends
//                         with the job (ferry:run, ferry:map, the API's) it was taken in, or without one
//                         with its task's last message.
//   ferry:pool:node_left  the node it names is gone from then on.
//
// Node lifetimes are approximated, since no trace records a node's own start and stop: a node runs from
// the start of the acquire it joined the pool in (`joined`: it was made and booted inside that acquire),
// or, when no trace shows it joining, from its first lease's start, until the earliest of: its node_left,
// its last lease's end plus the pool's idle timeout (when it would stop itself), the traces' last message.
// A lease that starts after the node's life so reckoned has ended (or an acquire that joins a node of a
// name already seen: names are reused) starts another life of that name. Leases are clipped to their
// node's life (a node that left took its leases with it). So node-hours are an estimate: nodes the pool
// kept warm that no traced agent leased are not in them, and a node that stopped before its idle timeout
// (or was kept after it) is off by the difference.
//
// Per tenant: its acquires and waits, its leases' slot-hours; its node-hours are the hours of nodes while
// it held a lease on them (two tenants on one node both count those hours); its utilisation its slot-hours
// over those node-hours times the slots per node; its idle node-hours the idle stretches that followed the
// end of its lease (the lease that ended last before the stretch, so the tenants' idle hours add up to the
// pool's). Idle is time after a node's first lease began with no lease on it: the boot inside a joining
// acquire is not idle.
#include "tracing/task_tree.hpp"
#include "tracing/trace_file.hpp"

#include <map>
#include <string>
#include <vector>

namespace ferry::agent::pool {

struct pool_stats_settings {
  int node_slots = 1;         // slots per node (pool.node_slots)
  double idle_timeout = 600;  // seconds an idle node stays before it stops itself (pool.idle_timeout)
};

struct pool_figures {
  std::size_t acquires = 0;    // every acquire, whatever its outcome
  std::size_t failed = 0;      // ended failed or cancelled: a wait that got nothing
  std::size_t unfinished = 0;  // never ended in the traces (the agent was killed)
  double wait_p50 = 0, wait_p95 = 0, wait_max = 0;  // seconds, every acquire's (nearest rank)
  double wait_mean = 0;
  double leased_slot_seconds = 0;
  double node_seconds = 0;
  double idle_node_seconds = 0;
  double utilisation = 0;  // leased slot-seconds over node-seconds times slots per node; 0 without nodes
};

struct pool_stats {
  pool_stats_settings settings;
  std::size_t leases = 0;    // acquires that succeeded
  std::size_t releases = 0;  // leases given back
  std::size_t nodes = 0;  // node lives: a name reused after its node left counts again
  std::size_t node_left = 0;
  pool_figures pool;
  std::map<std::string, pool_figures> tenants;  // by the acquire's `tenant` ("-" without one)

  // Nothing of a pool in the traces: no acquire, no release, no node that left.
  bool empty() const { return pool.acquires == 0 && releases == 0 && node_left == 0; }
};

pool_stats compute_pool_stats(const tracing::trace_set& traces, const std::vector<tracing::task_tree>& tasks,
                              const pool_stats_settings& settings);

}  // namespace ferry::agent::pool
