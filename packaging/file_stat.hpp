#pragma once
// The stat fields a file_key is made of, and how a file open now differs from the key taken earlier:
// the walker takes keys, hashing and zipping check against them.
#include "packaging/file_entry.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <string>

namespace ferry::packaging {

inline std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

inline file_key key_of(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
          static_cast<std::uint64_t>(st.st_size), mtime_ns(st)};
}

// How the file differs from the one `key` was taken from, or "" when it does not (the device is not
// compared: the same open path cannot move to another file system unnoticed by the inode).
inline std::string difference(const struct stat& st, const file_key& key) {
  if (static_cast<std::uint64_t>(st.st_ino) != key.inode) return "it was replaced by another file";
  if (static_cast<std::uint64_t>(st.st_size) != key.size) {
    return fmt::format("its size went from {} to {} bytes", key.size, st.st_size);
  }
  if (mtime_ns(st) != key.mtime_ns) return "it was modified";
  return {};
}

}  // namespace ferry::packaging
