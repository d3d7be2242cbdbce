#pragma once
// Failures of the agent's own work: joining packed layers and ready nodes into a run.
#include <boost/system/error_code.hpp>

#include <type_traits>

namespace ferry::agent {

enum class errc {
  no_storage = 1,      // a command that ships the project has no storage.url
  no_nodes,            // no node could be had for the work
  node_lost,           // a node stopped answering during the work; its tasks go elsewhere
  bad_task_input,      // a map's --range or --inputs cannot be read
  tasks_failed,        // some map tasks failed after every retry

  // Materialising layers on a node (agent/materialise/materialise.hpp; the node program's own failures are
  // agent/node/error.hpp's).
  node_lacks_tools,      // the node program is missing from this build, or could not be put on the node
  materialise_failed,    // the node program failed without saying why (its stderr is in the diagnostics)

  // Warm nodes (agent/provide/node_watchdog.hpp).
  watchdog_failed,       // a node's idle watchdog could not be installed or stopped (diagnostics say why)
  node_lease_failed,     // a pool lease's expiry could not be written on a node (agent/provide/node_lease.hpp)

  // Data staging (agent/materialise/stage.hpp).
  bad_stage,             // a --stage or --stage-window that cannot work (bad spec, empty prefix, window too small)
  stage_failed,          // a node could not stage the data (diagnostics name the object and why)

  // Clusters (agent/cluster/).
  bad_cluster_record,    // a cluster's state file cannot be read or parsed
  cluster_failed,        // the scheduler or the workers did not start, or the cluster ended (diagnostics say why)
  no_such_cluster,       // `cluster down NAME` of a name no cluster has

  // The node's Python (agent/run/python_check.hpp).
  python_mismatch,       // it cannot run what was packed: another version, implementation, machine or glibc
  python_unknown,        // it could not be asked (not there, or its answer unreadable)

  // The Python API (agent/api/).
  bad_frame,             // the ferry package or a worker sent a frame that breaks the protocol
  worker_failed,         // a worker ended before its tasks did (diagnostics say how)

  // The team pool's leases (agent/pool/).
  bad_pool_record,       // a node's record in the pool cannot be read, or breaks its own rules (diagnostics name the field)
  bad_lease_request,     // a lease asked for no slots, no tenant, no time, or more slots than a node has
  pool_cannot_fit,       // the pool is at its maximum and none of its nodes could ever hold the request
  pool_contended,        // every write lost to another agent's, as many times in a row as allowed
  lease_lost,            // the lease to renew expired or is gone: its slots may be someone else's
  pool_full,             // every slot stayed leased for as long as the acquire could wait
  pool_cannot_grow,      // the pool needs a new node, and the command has no way to make one
  bad_pool_name,         // a pool's name that cannot name a prefix in storage
};

const boost::system::error_category& category();

inline boost::system::error_code make_error_code(errc e) { return {static_cast<int>(e), category()}; }

}  // namespace ferry::agent

template <>
struct boost::system::is_error_code_enum<ferry::agent::errc> : std::true_type {};
