#include "provision/file_lock.hpp"

#include "provision/error.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace ferry::provision {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// Holders keep the lock for a read-modify-write of a small file: microseconds. The first retries are
// quick; the cap keeps a long wait from spinning.
constexpr auto first_retry = 1ms;
constexpr auto max_retry = 25ms;

}  // namespace

file_lock::~file_lock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the flock
}

asio::awaitable<result<file_lock>> lock_file(const std::filesystem::path& file, config::duration timeout,
                                             diagnostics& diag) {
  std::error_code fs_ec;
  std::filesystem::create_directories(file.parent_path(), fs_ec);
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    const error_code ec(errno, sys::system_category());
    diag.set(fmt::format("cannot open lock file {}: {}", file.string(), ec.message()));
    co_return ec;
  }
  file_lock held(fd);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (std::chrono::milliseconds wait = first_retry;; wait = std::min<std::chrono::milliseconds>(wait * 2, max_retry)) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) co_return std::move(held);
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const error_code ec(errno, sys::system_category());
      diag.set(fmt::format("cannot lock {}: {}", file.string(), ec.message()));
      co_return ec;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      diag.set(fmt::format("{} stayed locked by another ferry command for {} (nodes.registry_lock_timeout)",
                           file.string(), config::format_duration(timeout)));
      co_return make_error_code(errc::registry_busy);
    }
    timer.expires_after(wait);
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return ec;  // cancelled
  }
}

}  // namespace ferry::provision
