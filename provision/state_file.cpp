#include "provision/state_file.hpp"

#include "net/atomic_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace ferry::provision {
namespace {

namespace fs = std::filesystem;

error_code last_error() { return {errno, sys::system_category()}; }

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
  return net::write_file_atomically(file, text, diag, {.mode = 0600, .make_parent = false});
}

}  // namespace ferry::provision
