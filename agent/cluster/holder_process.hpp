#pragma once
// The process that holds a cluster (dask_holder.hpp), seen from the commands that start and end it
// (`ferry cluster up|run|down`): it is started detached, in a session of its own, so that it outlives the
// command (init adopts it when the shell around it exits); the command then waits until its record
// (cluster_record.hpp) says ready or failed, or the holder is gone. Stopping it is SIGTERM: it stops the
// scheduler, the workers and its forwarding, and SIGKILL follows when it does not end in time.
#include "agent/cluster/cluster_record.hpp"
#include "agent/cli/command_context.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <string>

namespace ferry::agent {

struct cluster_wanted {
  std::string name = "dask";
  std::string engine = "dask";
  std::size_t nodes = 1;  // a worker on each
};

// The cluster of that name, ready: the one that runs, or a new one whose holder this starts and awaits.
// `reused` says which. One `up` at a time decides whether to start a holder (a lock beside the records);
// one that is going away is waited for, then replaced. A Ctrl-C while it waits stops the new holder.
boost::asio::awaitable<result<cluster_record>> bring_up_cluster(const command_context& ctx, tracing::action& act,
                                                                const cluster_wanted& wanted, bool& reused,
                                                                diagnostics& diag);

struct stopped_holder {
  bool clean = true;    // false: it did not stop in time and was killed
  cluster_record last;  // its last word: it names every node it made, those of a replacement under way too
};

// Stops the record's holder and forgets the cluster.
boost::asio::awaitable<stopped_holder> stop_cluster_holder(const command_context& ctx, const cluster_record& r);

}  // namespace ferry::agent
