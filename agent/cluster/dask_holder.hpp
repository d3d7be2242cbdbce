#pragma once
// The process that holds one Dask cluster: `ferry cluster hold`, which `cluster up` starts detached so that
// the cluster outlives it. It is one job (agent/job/job.hpp): the project is packed and shipped to the nodes
// (warm ones first) as for `ferry run`, then on the first node ready a scheduler, and on every node a
// worker, run from the shipped environment under ferry's process-group wrapper, as long-lived commands.
//
//   - The scheduler listens on its node's private address (port chosen by it, read from its log); the
//     workers reach it there. The workstation reaches it, and its dashboard, only through SSH forwarding on
//     the session ferry holds to that node (net/ssh_forward.hpp), on 127.0.0.1 ports of this process.
//   - Once every worker has registered, the cluster record (cluster_record.hpp) says `ready` with the
//     workstation's addresses; until then `starting`, or `failed` with the reason.
//   - A worker whose node is lost is replaced (up to nodes.max_nodes nodes in all) and the new one joins;
//     Dask reschedules the lost work itself. A lost scheduler ends the cluster: Dask has only one.
//   - No client connected for nodes.idle_timeout (0: never) ends it, as does SIGTERM (`cluster down`):
//     total cancellation stops the remote processes, and the nodes go back to the warm pool.
//
// Trace: under ferry:cluster:hold, the job's steps, ferry:cluster:scheduler and ferry:cluster:worker per
// node (with their registration), ferry:cluster:forwarding per port (each connection an ssh:forward),
// ferry:cluster:ready, and any worker_lost, replace and idle.
#include "agent/cli/command_context.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <filesystem>
#include <string>

namespace ferry::agent {

struct hold_options {
  std::string name;
  std::size_t nodes = 2;
  std::filesystem::path dir;  // where the cluster records are (cluster_record.hpp)
  std::string log;            // the file this process's output goes to, for the record
};

// Holds the cluster until it is idle, it fails, or the process is told to stop. Returns the exit code.
boost::asio::awaitable<int> hold_dask_cluster(const command_context& ctx, const hold_options& options);

}  // namespace ferry::agent
