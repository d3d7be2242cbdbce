#pragma once
// Provisioning failures: getting nodes from a provider and waiting until they can run commands.
#include <boost/system/error_code.hpp>

#include <type_traits>

namespace ferry::provision {

enum class errc {
  unknown_provider = 1,  // nodes.provider names no provider ferry has
  bad_node_config,       // the provider's settings are missing or invalid (names the key)
  provider_failed,       // the provider refused or failed a request (the diagnostics carry its words)
  node_not_found,        // the provider or the registry has no node with that id
  not_running_in_time,   // the node did not reach "running" within nodes.ready_timeout
  ssh_not_ready_in_time, // the node ran but SSH did not answer, greet or log in within nodes.ready_timeout
  node_terminated,       // the node ended (or failed to start) while ferry waited for it
  no_matching_type,      // no instance type in the catalogue meets the spec
  bad_registry,          // the node registry file is damaged (names the file)
  local_setup_failed,    // a local node's sshd, namespace or bridge could not be set up
  already_exists,        // what a provider was asked to create exists already (EC2's *.Duplicate)
  registry_busy,         // another ferry command held a state file's lock past nodes.registry_lock_timeout
  no_free_hosts,         // the ssh provider has fewer unclaimed hosts than nodes were asked for
};

const boost::system::error_category& category();

inline boost::system::error_code make_error_code(errc e) { return {static_cast<int>(e), category()}; }

}  // namespace ferry::provision

template <>
struct boost::system::is_error_code_enum<ferry::provision::errc> : std::true_type {};
