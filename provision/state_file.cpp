#include "provision/state_file.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace ferry::provision {
namespace {

namespace fs = std::filesystem;

error_code last_error() { return {errno, sys::system_category()}; }

// Writes everything or fails; EINTR is not a failure.
error_code write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const auto n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return last_error();
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

// Unique among the processes and the threads writing beside the same file.
fs::path temporary_beside(const fs::path& file) {
  static std::atomic<unsigned> counter{0};
  return fs::path(file).concat(fmt::format(".tmp.{}.{}", ::getpid(), counter++));
}

}  // namespace

std::optional<std::string> read_state_file(const fs::path& file, error_code& ec) {
  ec.clear();
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) ec = last_error();
    return std::nullopt;
  }
  std::string text;
  char buf[16384];
  for (;;) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ec = last_error();
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (ec) return std::nullopt;
  return text;
}

result<void> write_state_file(const fs::path& file, std::string_view text, diagnostics& diag) {
  const auto temp = temporary_beside(file);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  error_code ec = fd < 0 ? last_error() : write_all(fd, text);
  // fsync before rename: otherwise a crash may leave the new name pointing at an empty file.
  if (!ec && ::fsync(fd) != 0) ec = last_error();
  if (fd >= 0 && ::close(fd) != 0 && !ec) ec = last_error();
  if (!ec && ::rename(temp.c_str(), file.c_str()) != 0) ec = last_error();
  if (ec) {
    ::unlink(temp.c_str());
    diag.set(fmt::format("cannot write {}: {}", file.string(), ec.message()));
    return ec;
  }
  return {};
}

}  // namespace ferry::provision
