#pragma once
// The workload a pool served, from traces: one simulator job per traced run, map or API job that had
// nodes. Its arrival is its start (seconds after the earliest job's start), its tenant the job's `tenant`
// field (jobs without one are "-"), its slots the nodes that ran its tasks, and its duration the span in
// which it ran tasks, from its first task's start on any node to its last task's end: what it would have
// held had its slots been ready when it asked. Time a real run spent waiting for nodes, booting them or
// landing layers before its first task is not in it: the simulator adds the waits of the policy it plays.
#include "agent/pool/pool_simulator.hpp"
#include "tracing/trace_stats.hpp"

#include <vector>

namespace ferry::agent::pool {

std::vector<sim_job> workload_from(const tracing::trace_stats& stats);

}  // namespace ferry::agent::pool
