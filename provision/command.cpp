#include "provision/command.hpp"

#include "net/cancellation.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace ferry::provision {
namespace {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;
using descriptor = asio::posix::stream_descriptor;

// Helpers print a few lines; anything past this is kept from being a memory problem, not read for meaning.
constexpr std::size_t output_limit = 1 << 20;

auto on_error(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }
auto uncancellable(error_code& ec) { return asio::bind_cancellation_slot(asio::cancellation_slot(), on_error(ec)); }

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The child: its own process group, owned by this object, reaped before the object goes. The pidfd turns
// its exit into readiness on a descriptor; without pidfd_open (old kernels, seccomp) a short poll stands in.
class child {
 public:
  explicit child(const asio::any_io_executor& ex) : out_(ex), err_(ex), pidfd_(ex) {}
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  ~child() {  // only when a frame is torn down early: SIGKILL makes the blocking wait short
    if (pid_ <= 0 || reaped_) return;
    ::kill(-pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }

  error_code start(std::vector<std::string> argv);
  descriptor& out() { return out_; }
  descriptor& err() { return err_; }
  asio::awaitable<error_code> exited(bool cancellable);
  int reap(leftovers rest = leftovers::kill);
  asio::awaitable<void> kill_and_reap();

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  descriptor out_, err_, pidfd_;
};

error_code child::start(std::vector<std::string> argv) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {errno, sys::system_category()};
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out[0]), ::close(out[1]);
    return {e, sys::system_category()};
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Signals ferry blocks or ignores go back to their defaults, as in a shell.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  auto argp = pointers(argv);
  const int rc = ::posix_spawnp(&pid_, argv.at(0).c_str(), &actions, &attr, argp.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    pid_ = -1;
    ::close(out[0]), ::close(err[0]);
    return {rc, sys::system_category()};
  }
  out_.assign(out[0]);
  err_.assign(err[0]);
  // A raw syscall: glibc 2.36 declares pidfd_open without C linkage for C++.
  if (const auto fd = ::syscall(SYS_pidfd_open, pid_, 0); fd >= 0) pidfd_.assign(static_cast<int>(fd));
  return {};
}

asio::awaitable<error_code> child::exited(bool cancellable) {
  error_code ec;
  if (pidfd_.is_open()) {
    if (cancellable)
      co_await pidfd_.async_wait(descriptor::wait_read, on_error(ec));
    else
      co_await pidfd_.async_wait(descriptor::wait_read, uncancellable(ec));
    co_return ec;
  }
  asio::steady_timer tick(pidfd_.get_executor());
  for (auto delay = 1ms;; delay = std::min<std::chrono::milliseconds>(delay * 2, 50ms)) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_)
      co_return ec;
    tick.expires_after(delay);
    if (cancellable)
      co_await tick.async_wait(on_error(ec));
    else
      co_await tick.async_wait(uncancellable(ec));
    if (ec) co_return ec;
  }
}

// The zombie leader keeps the group id taken until reaped, so this kill cannot reach a stranger.
int child::reap(leftovers rest) {
  if (rest == leftovers::kill) ::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

asio::awaitable<void> child::kill_and_reap() {
  if (reaped_) co_return;
  ::kill(-pid_, SIGKILL);
  co_await exited(false);
  reap();
}

asio::awaitable<void> read_all(descriptor& from, std::string& into, error_code& failure) {
  co_await net::accept_cancellation();
  std::array<char, 8192> buf;
  for (;;) {
    error_code ec;
    const auto n = co_await from.async_read_some(asio::buffer(buf), on_error(ec));
    if (into.size() < output_limit) into.append(buf.data(), std::min(n, output_limit - into.size()));
    if (ec == asio::error::eof) co_return;
    if (ec) {
      failure = ec;
      co_return;
    }
  }
}

// Both streams to their end, then the exit. Returns early without an exit code when cancelled.
asio::awaitable<void> collect(child& c, command_result& got, error_code& failure, leftovers rest) {
  co_await net::accept_cancellation();
  error_code out_error, err_error;
  co_await (read_all(c.out(), got.out, out_error) && read_all(c.err(), got.err, err_error));
  failure = out_error ? out_error : err_error;
  if (failure) co_return;
  failure = co_await c.exited(true);
  if (failure) co_return;
  got.exit_code = c.reap(rest);
}

// The deadline as an operand of ||; it accepts total cancellation so that the group can end it.
asio::awaitable<void> expiry(asio::steady_timer& timer) {
  co_await net::accept_cancellation();
  error_code ec;
  co_await timer.async_wait(on_error(ec));
}

}  // namespace

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()[]{}~#") == std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? a : shell_quote(a));
  }
  return out;
}

asio::awaitable<result<command_result>> run_command(const std::vector<std::string>& argv, config::duration timeout,
                                                    diagnostics& diag, leftovers after_exit) {
  auto ex = co_await asio::this_coro::executor;
  child c(ex);
  if (const auto ec = c.start(argv)) {
    diag.set(fmt::format("cannot start {}: {}", argv.at(0), ec.message()));
    co_return ec;
  }
  command_result got;
  error_code failure;
  asio::steady_timer deadline(ex, timeout);
  const auto first = co_await (collect(c, got, failure, after_exit) || expiry(deadline));
  co_await c.kill_and_reap();  // a no-op when collect() reaped it
  if (co_await net::cancelled()) co_return make_error_code(asio::error::operation_aborted);
  if (first.index() == 1) {
    diag.set(fmt::format("{} did not finish within {}", command_line(argv), config::format_duration(timeout)));
    co_return make_error_code(asio::error::timed_out);
  }
  if (failure) {
    diag.set(fmt::format("reading the output of {}: {}", argv.at(0), failure.message()));
    co_return failure;
  }
  co_return got;
}

}  // namespace ferry::provision
