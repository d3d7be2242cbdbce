#pragma once
// Packaging failures: reading the project's files and turning them into layers.
#include <boost/system/error_code.hpp>

#include <type_traits>

namespace ferry::packaging {

enum class errc {
  unreadable_file = 1,  // a file or directory under a sys.path entry (or an ignore file) cannot be read
  bad_pattern,          // an exclude pattern ferry refuses (ignore files themselves never fail, as in git)
  not_a_directory,      // a sys.path entry or workspace root is not a directory
  external_symlink,     // a symlink leaves the tree and packaging.external_symlinks is "refuse"
  layer_too_large,      // a layer would exceed packaging.max_layer_size
  file_changed,         // a file vanished or changed between hashing and zipping it
  symlink_loop,         // following symlinks leads back into a directory already being walked
  python_failed,        // the configured interpreter could not be run, or exited non-zero
  bad_probe_output,     // the interpreter's answer about sys.path could not be understood
  probe_timeout,        // the interpreter did not answer within packaging.discover_timeout
  bad_cache,            // the hash cache file is damaged (it is then rebuilt, never trusted)
  bad_manifest,         // a stored manifest is malformed, or lacks the digests of its shards' zips
};

const boost::system::error_category& category();

inline boost::system::error_code make_error_code(errc e) { return {static_cast<int>(e), category()}; }

}  // namespace ferry::packaging

template <>
struct boost::system::is_error_code_enum<ferry::packaging::errc> : std::true_type {};
