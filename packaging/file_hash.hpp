#pragma once
// The content hash of one layer entry. Synchronous: callers run it on the CPU pool through offload().
#include "net/digest.hpp"
#include "packaging/file_entry.hpp"
#include "tracing/diagnostics.hpp"

#include <span>

namespace ferry::packaging {

// A regular file's bytes, or a symlink's target string. The file must still be the one the walker saw
// (same inode, size and mtime), else errc::file_changed: a hash that belongs to other bytes than the
// ones zipped later would give the layer a wrong id. `hasher` and `buffer` are reused across calls so a
// thread hashing thousands of small files allocates nothing per file.
result<sha256_digest> hash_entry(const file_entry& entry, net::sha256_stream& hasher, std::span<char> buffer,
                                 diagnostics& diag);
// Bytes [offset, offset + length) of a regular file (a piece of it: layer.hpp), with the same check that
// the file is still the one the walker saw.
result<sha256_digest> hash_range(const file_entry& entry, std::uint64_t offset, std::uint64_t length,
                                 net::sha256_stream& hasher, std::span<char> buffer, diagnostics& diag);

// Opens a file for reading without updating its access time where the kernel allows it (it refuses
// O_NOATIME for files of other users). Returns -1 with errno set on failure.
int open_for_reading(const std::string& file);

}  // namespace ferry::packaging
