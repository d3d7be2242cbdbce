#include "packaging/file_hash.hpp"

#include "packaging/error.hpp"
#include "packaging/file_stat.hpp"
#include "packaging/unique_fd.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::packaging {
namespace {

result<sha256_digest> changed(const file_entry& entry, diagnostics& diag, std::string_view how) {
  diag.set(fmt::format("{}: {} while it was being packed; run again once it is stable", entry.source, how));
  return error_code(errc::file_changed);
}

result<unique_fd> open_entry(const file_entry& entry, diagnostics& diag) {
  unique_fd fd(open_for_reading(entry.source));
  if (fd.get() < 0) {
    if (errno == ENOENT) return changed(entry, diag, "vanished").error();
    diag.set(fmt::format("{}: cannot read: {}", entry.source, std::strerror(errno)));
    return error_code(errc::unreadable_file);
  }
  return fd;
}

}  // namespace

int open_for_reading(const std::string& file) {
  // O_NONBLOCK: a FIFO found in the file's place must not hang the open (the fstat check refuses it);
  // regular files ignore the flag.
  constexpr int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  // O_NOATIME spares the file system an inode update per file, but only the owner (or root) may ask.
  int fd = ::open(file.c_str(), flags | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = ::open(file.c_str(), flags);
  return fd;
}

result<sha256_digest> hash_entry(const file_entry& entry, net::sha256_stream& hasher, std::span<char> buffer,
                                 diagnostics& diag) {
  hasher.reset();
  if (entry.type == file_entry::kind::symlink) {
    hasher.update(entry.link_target);
    return hasher.finish();
  }
  auto opened = open_entry(entry, diag);
  if (!opened) return opened.error();
  auto fd = std::move(*opened);
  if (entry.key.size > buffer.size()) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  // Reads at most one byte more than the walk saw, so a file that grew (or a device put in its place)
  // is noticed without reading it all; a short read of exactly the expected size is the end of the file
  // without a further read. The one fstat after reading catches a replaced, resized or rewritten file:
  // per small file this is open, read, fstat, close.
  std::uint64_t total = 0;
  for (;;) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), entry.key.size + 1 - total));
    const auto n = ::read(fd.get(), buffer.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      diag.set(fmt::format("{}: cannot read: {}", entry.source, std::strerror(errno)));
      return error_code(errc::unreadable_file);
    }
    if (n == 0) break;
    hasher.update(reinterpret_cast<const unsigned char*>(buffer.data()), static_cast<std::size_t>(n));
    total += static_cast<std::uint64_t>(n);
    if (total > entry.key.size) return changed(entry, diag, "grew");
    if (static_cast<std::size_t>(n) < want && total == entry.key.size) break;
  }
  struct stat after {};
  if (total != entry.key.size || ::fstat(fd.get(), &after) != 0 || !difference(after, entry.key).empty()) {
    return changed(entry, diag, "changed");
  }
  return hasher.finish();
}

result<sha256_digest> hash_range(const file_entry& entry, std::uint64_t offset, std::uint64_t length,
                                 net::sha256_stream& hasher, std::span<char> buffer, diagnostics& diag) {
  hasher.reset();
  auto opened = open_entry(entry, diag);
  if (!opened) return opened.error();
  auto fd = std::move(*opened);
  ::posix_fadvise(fd.get(), static_cast<off_t>(offset), static_cast<off_t>(length), POSIX_FADV_SEQUENTIAL);
  std::uint64_t done = 0;
  while (done < length) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), length - done));
    const auto n = ::pread(fd.get(), buffer.data(), want, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      diag.set(fmt::format("{}: cannot read: {}", entry.source, std::strerror(errno)));
      return error_code(errc::unreadable_file);
    }
    if (n == 0) return changed(entry, diag, "shrank");
    hasher.update(reinterpret_cast<const unsigned char*>(buffer.data()), static_cast<std::size_t>(n));
    done += static_cast<std::uint64_t>(n);
  }
  struct stat after {};
  if (::fstat(fd.get(), &after) != 0 || !difference(after, entry.key).empty()) return changed(entry, diag, "changed");
  return hasher.finish();
}

}  // namespace ferry::packaging
