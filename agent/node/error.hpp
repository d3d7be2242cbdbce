#pragma once
// Failures of the node program's own work (agent/node/): reading a plan, fetching and extracting layers.
#include <boost/system/error_code.hpp>

#include <type_traits>

namespace ferry::agent::node {

enum class errc {
  bad_plan = 1,       // the JSON plan on stdin is malformed or names something impossible
  download_failed,    // a shard could not be downloaded (HTTP status, timeout, unreachable storage)
  digest_mismatch,    // a shard's bytes do not have the SHA-256 the plan names
  bad_zip,            // a shard is not a well-formed zip (short, a bad header, a CRC that does not match)
  hostile_entry,      // an entry is absolute, holds `..`, passes through a symlink, or is there twice
  over_manifest,      // a shard holds more files or bytes than the manifest says, or more than the cap
  disk_full,          // the layer does not fit on the node's disk
  cache_failed,       // the layer cache could not be read or written (permissions, a damaged marker)
  lock_timeout,       // another run held a layer's lock past the plan's lock timeout
  self_check_failed,  // the node program's own bytes do not have the SHA-256 it was sent under
  serve_failed,       // `serve` could not listen on the node's address
  not_packed,         // a shard's entries are not the ones the workstation packed (its id does not match)
  tenant_failed,      // a pool tenant cannot run as its own user here (not root, no useradd, a name taken)
};

const boost::system::error_category& category();

inline boost::system::error_code make_error_code(errc e) { return {static_cast<int>(e), category()}; }

}  // namespace ferry::agent::node

template <>
struct boost::system::is_error_code_enum<ferry::agent::node::errc> : std::true_type {};
