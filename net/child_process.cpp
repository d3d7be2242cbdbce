#include "net/child_process.hpp"

#include "net/deadline.hpp"

#include "net/cancellation.hpp"
#include "net/shell_quote.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>
#include <unistd.h>

extern char** environ;

namespace ferry::net {
namespace {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;
using descriptor = asio::posix::stream_descriptor;

auto on_error(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }
// An empty slot: the operation ignores the coroutine's cancellation.
auto uncancellable(error_code& ec) { return asio::bind_cancellation_slot(asio::cancellation_slot(), on_error(ec)); }

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// ---- the child's process -----------------------------------------------------------------------------------

// The child, in a process group of its own, owned by whoever holds this object: it must be reaped before the
// object goes. Its exit is waited for with a pidfd: the exit becomes readiness on a descriptor the io_context
// already waits on, with no SIGCHLD handler (which would be process-wide and would race with code that reaps
// its own children) and no polling delay. Where pidfd_open is missing (Linux before 5.3, or a seccomp sandbox
// that forbids it) a WNOHANG poll on a timer stands in.
class child {
 public:
  explicit child(const asio::any_io_executor& ex) : out_(ex), err_(ex), pidfd_(ex) {}
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  // The last resort, when an exception or a torn-down coroutine frame skips kill_and_reap(): a blocking
  // waitpid, short because of the SIGKILL before it.
  ~child() {
    if (pid_ <= 0 || reaped_) return;
    ::kill(-pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    take_terminal_back();
  }

  error_code start(const child_request& request);

  descriptor& out() { return out_; }
  descriptor& err() { return err_; }

  // Until the child has exited; it stays a zombie, not reaped.
  asio::awaitable<error_code> exited(bool cancellable);
  // After exited(): kills what is left of the group (unless kept), then reaps the leader and returns its wait
  // status. The zombie leader keeps the group id taken, so that the kill cannot reach a stranger that reused it.
  int reap(leftovers rest);
  // SIGKILL to the whole group, then reaped. Not cancellable: after SIGKILL the wait is short, and the
  // zombie must be reaped even if more cancellations arrive.
  asio::awaitable<void> kill_and_reap();

 private:
  bool has_exited() const;
  void take_terminal_back();

  pid_t pid_ = -1;
  bool reaped_ = false;
  bool gave_terminal_ = false;  // the program's group has the terminal (inherit_stdio on a terminal)
  descriptor out_, err_, pidfd_;
};

error_code child::start(const child_request& request) {
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!request.inherit_stdio) {
    if (::pipe2(out, O_CLOEXEC) != 0) {
      posix_spawn_file_actions_destroy(&actions);
      return {errno, sys::system_category()};
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
      const int e = errno;
      ::close(out[0]), ::close(out[1]);
      posix_spawn_file_actions_destroy(&actions);
      return {e, sys::system_category()};
    }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  } else if (::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) {
    // The terminal is ferry's: the program's group gets it before it runs, so that it may read it (input(), a
    // debugger) and Ctrl-C reaches it as it would without ferry. ferry takes it back once the program ended.
    posix_spawn_file_actions_addtcsetpgrp_np(&actions, STDIN_FILENO);
    gave_terminal_ = true;
  }
  if (request.working_dir) posix_spawn_file_actions_addchdir_np(&actions, request.working_dir->c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own group, so that a timeout kills a launcher's children too. Signals ferry blocks or ignores go
  // back to their defaults, as in a shell.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);

  auto argv = request.argv;
  auto argp = pointers(argv);
  auto env = request.environment;
  const auto envp = env ? pointers(*env) : std::vector<char*>();
  // posix_spawnp searches PATH only for a name without a '/', so an explicit executable runs as it is. glibc
  // no longer falls back to /bin/sh for a file without a #! line: such a file fails with ENOEXEC.
  const char* program = request.executable ? request.executable->c_str() : argv.at(0).c_str();
  const int rc = ::posix_spawnp(&pid_, program, &actions, &attr, argp.data(), env ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (!request.inherit_stdio) ::close(out[1]), ::close(err[1]);
  if (rc != 0) {
    pid_ = -1;
    if (!request.inherit_stdio) ::close(out[0]), ::close(err[0]);
    return {rc, sys::system_category()};
  }
  if (!request.inherit_stdio) {
    out_.assign(out[0]);
    err_.assign(err[0]);
  }
  // The pid cannot be reused before it is reaped, so the pidfd surely names our child. A raw syscall:
  // glibc 2.36's <sys/pidfd.h> declares pidfd_open without C linkage for C++.
  if (const auto fd = ::syscall(SYS_pidfd_open, pid_, 0); fd >= 0) pidfd_.assign(static_cast<int>(fd));
  return {};
}

bool child::has_exited() const {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_;
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
  for (auto delay = 1ms; !has_exited(); delay = std::min<std::chrono::milliseconds>(delay * 2, 50ms)) {
    tick.expires_after(delay);
    if (cancellable)
      co_await tick.async_wait(on_error(ec));
    else
      co_await tick.async_wait(uncancellable(ec));
    if (ec) co_return ec;
  }
  co_return ec;
}

int child::reap(leftovers rest) {
  if (rest == leftovers::kill) ::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  take_terminal_back();
  return status;
}

void child::take_terminal_back() {
  if (!gave_terminal_) return;
  gave_terminal_ = false;
  // ferry is in the background now: without blocking SIGTTOU, asking for the terminal would stop it.
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  ::pthread_sigmask(SIG_BLOCK, &ttou, &old);
  ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

asio::awaitable<void> child::kill_and_reap() {
  if (reaped_) co_return;
  ::kill(-pid_, SIGKILL);
  co_await exited(false);
  reap(leftovers::kill);
}

// ---- collecting the output -----------------------------------------------------------------------------------

// Reads to the end of the stream, keeping what `limit` allows.
asio::awaitable<void> read_all(descriptor& from, std::string& into, output_limit limit, error_code& failure) {
  co_await accept_cancellation();
  std::array<char, 16384> buf;
  for (;;) {
    error_code ec;
    const auto n = co_await from.async_read_some(asio::buffer(buf), on_error(ec));
    into.append(buf.data(), n);
    if (into.size() > limit.bytes && limit.keep_tail) into.erase(0, into.size() - limit.bytes);
    if (into.size() > limit.bytes) into.resize(limit.bytes);
    if (ec == asio::error::eof) co_return;
    if (ec) {
      failure = ec;
      co_return;
    }
  }
}

void set_exit(child_result& got, int status) {
  if (WIFEXITED(status)) {
    got.exit_code = WEXITSTATUS(status);
  } else {
    got.signal = WTERMSIG(status);
    got.exit_code = 128 + got.signal;
  }
}

// Both streams to their end, then the exit. Returns early without an exit code when cancelled.
asio::awaitable<void> collect(child& c, const child_request& request, child_result& got, error_code& failure) {
  co_await accept_cancellation();
  if (!request.inherit_stdio) {
    error_code out_error, err_error;
    co_await (read_all(c.out(), got.out, request.out_limit, out_error) &&
              read_all(c.err(), got.err, request.err_limit, err_error));
    failure = out_error ? out_error : err_error;
    if (failure) co_return;
  }
  failure = co_await c.exited(true);
  if (failure) co_return;
  set_exit(got, c.reap(request.after_exit));
}

// argv[0], and the executable run for it when that is another name.
std::string program(const child_request& request) {
  const auto& name = request.argv.at(0);
  if (!request.executable || request.executable->string() == name) return name;
  return fmt::format("{} ({})", name, request.executable->string());
}

}  // namespace

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?;&|<>()[]{}~#") == std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? a : shell_quote(a));
  }
  return out;
}

asio::awaitable<result<child_result>> run_child(const child_request& request, diagnostics& diag) {
  auto ex = co_await asio::this_coro::executor;
  child c(ex);
  if (const auto ec = c.start(request)) {
    diag.set(fmt::format("cannot start {}: {}", program(request), ec.message()));
    co_return ec;
  }
  child_result got;
  error_code failure;
  bool finished = true;
  if (request.timeout == config::duration::zero())
    co_await collect(c, request, got, failure);
  else
    finished = co_await with_deadline(collect(c, request, got, failure), request.timeout);
  co_await c.kill_and_reap();  // a no-op when collect() reaped it
  if (co_await cancelled()) co_return make_error_code(asio::error::operation_aborted);
  if (!finished) {
    diag.set(fmt::format("{} did not finish within {}", command_line(request.argv),
                         config::format_duration(request.timeout)));
    co_return make_error_code(asio::error::timed_out);
  }
  if (failure) {
    diag.set(fmt::format("reading the output of {}: {}", program(request), failure.message()));
    co_return failure;
  }
  co_return got;
}

}  // namespace ferry::net
