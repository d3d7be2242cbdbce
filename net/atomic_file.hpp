#pragma once
// The one way ferry replaces a small file whole (the node registry, the hash and digest caches, the
// discovery cache, known_hosts, keys, trace views): write a temporary beside it, fsync it, rename it over
// the file. A reader sees the old version or the new one, never a mix; a crash leaves the old version (the
// fsync keeps the new name from pointing at blocks not yet written); and two processes writing the same
// file at once each use a temporary of their own (pid, a counter and random bits in its name), so the last
// rename wins with a whole file rather than both writing into one temporary.
#include "tracing/diagnostics.hpp"

#include <sys/types.h>

#include <filesystem>
#include <span>
#include <string_view>

namespace ferry::net {

struct atomic_write_options {
  mode_t mode = 0600;        // of the new file (the umask applies)
  bool make_parent = true;   // create the directory when missing
};

// Replaces `file` with the concatenation of `pieces`. On failure nothing is left behind and diag names
// the file and the system's reason; the error is the system's.
result<void> write_file_atomically(const std::filesystem::path& file, std::span<const std::string_view> pieces,
                                   diagnostics& diag, const atomic_write_options& options = {});

inline result<void> write_file_atomically(const std::filesystem::path& file, std::string_view text, diagnostics& diag,
                                          const atomic_write_options& options = {}) {
  return write_file_atomically(file, std::span<const std::string_view>(&text, 1), diag, options);
}

// The name a temporary beside `file` gets: ".NAME.ferry-<pid>-<n>-<random>.tmp". Exposed for tests.
std::filesystem::path temporary_beside(const std::filesystem::path& file);

}  // namespace ferry::net
