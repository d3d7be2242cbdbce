#include "agent/error.hpp"

namespace ferry::agent {
namespace {

class category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "ferry.agent"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::no_storage: return "no storage configured";
      case errc::no_nodes: return "no nodes";
      case errc::node_lost: return "node lost";
      case errc::bad_task_input: return "bad task input";
      case errc::tasks_failed: return "tasks failed";
      case errc::node_lacks_tools: return "the node program could not be put on the node";
      case errc::materialise_failed: return "materialising layers failed on the node";
      case errc::watchdog_failed: return "the node's idle watchdog could not be set up";
      case errc::node_lease_failed: return "the lease could not be set on the node";
      case errc::bad_stage: return "bad staging request";
      case errc::stage_failed: return "staging failed on the node";
      case errc::bad_cluster_record: return "a cluster's state file cannot be read";
      case errc::cluster_failed: return "the cluster failed";
      case errc::no_such_cluster: return "no such cluster";
      case errc::python_mismatch: return "the node's Python cannot run what was packed";
      case errc::python_unknown: return "the node's Python could not be asked what it is";
      case errc::bad_frame: return "a frame of the Python API cannot be read";
      case errc::worker_failed: return "a worker of the Python API ended";
      case errc::bad_pool_record: return "a node's record in the pool cannot be read";
      case errc::bad_lease_request: return "bad lease request";
      case errc::pool_cannot_fit: return "no node of the pool can hold the request";
      case errc::pool_contended: return "the pool's records kept changing under every write";
      case errc::lease_lost: return "the lease expired or is gone";
      case errc::pool_full: return "the pool stayed full";
      case errc::pool_cannot_grow: return "the pool needs a node this command cannot make";
      case errc::bad_pool_name: return "not a pool name";
    }
    return "unknown agent error";
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const category_impl instance;
  return instance;
}

}  // namespace ferry::agent
