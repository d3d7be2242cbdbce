#include "net/atomic_file.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <unistd.h>

namespace ferry::net {
namespace {

error_code last_error() { return {errno, boost::system::system_category()}; }

error_code write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const auto n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return last_error();
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

}  // namespace

std::filesystem::path temporary_beside(const std::filesystem::path& file) {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  return file.parent_path() /
         fmt::format(".{}.ferry-{}-{}-{:08x}.tmp", file.filename().string(), ::getpid(), counter++, rd());
}

result<void> write_file_atomically(const std::filesystem::path& file, std::span<const std::string_view> pieces,
                                   diagnostics& diag, const atomic_write_options& options) {
  if (options.make_parent && file.has_parent_path()) {
    std::error_code ignored;  // a failure shows in the open below, naming the file
    std::filesystem::create_directories(file.parent_path(), ignored);
  }
  const auto temp = temporary_beside(file);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, options.mode);
  error_code ec = fd < 0 ? last_error() : error_code{};
  for (auto piece : pieces) {
    if (ec) break;
    ec = write_all(fd, piece);
  }
  if (!ec && ::fsync(fd) != 0) ec = last_error();
  if (fd >= 0 && ::close(fd) != 0 && !ec) ec = last_error();
  if (!ec && ::rename(temp.c_str(), file.c_str()) != 0) ec = last_error();
  if (ec) {
    if (fd >= 0) ::unlink(temp.c_str());
    diag.set(fmt::format("cannot write {}: {}", file.string(), ec.message()));
    return ec;
  }
  return {};
}

}  // namespace ferry::net
