#include "provision/error.hpp"

namespace ferry::provision {
namespace {

class category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "ferry.provision"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::unknown_provider: return "unknown node provider";
      case errc::bad_node_config: return "node provider is not configured correctly";
      case errc::provider_failed: return "node provider request failed";
      case errc::node_not_found: return "no such node";
      case errc::not_running_in_time: return "node did not start in time";
      case errc::ssh_not_ready_in_time: return "node did not answer SSH in time";
      case errc::node_terminated: return "node terminated";
      case errc::no_matching_type: return "no instance type meets the requirements";
      case errc::bad_registry: return "node registry is damaged";
      case errc::local_setup_failed: return "local node could not be set up";
      case errc::already_exists: return "already exists";
      case errc::registry_busy: return "node registry is locked by another ferry command";
      case errc::no_free_hosts: return "not enough unclaimed ssh hosts";
    }
    return "unknown provisioning error";
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const category_impl instance;
  return instance;
}

}  // namespace ferry::provision
