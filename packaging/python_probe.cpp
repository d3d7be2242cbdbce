#include "packaging/python_probe.hpp"

#include "config/units.hpp"
#include "net/cancellation.hpp"
#include "packaging/error.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
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
#include <cstring>
#include <fcntl.h>
#include <map>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace ferry::packaging {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;
using descriptor = asio::posix::stream_descriptor;

// PYTHONPLATLIBDIR and PYENV_DIR go beyond the obvious ones: the first renames lib/ in sys.path, the second
// moves where pyenv looks for .python-version.
constexpr std::array<std::string_view, 13> variables = {
    "PATH",          "PYTHONPATH",   "PYTHONHOME",    "PYTHONUSERBASE", "PYTHONNOUSERSITE",
    "PYTHONSAFEPATH", "PYTHONPLATLIBDIR", "VIRTUAL_ENV", "CONDA_PREFIX",  "PYENV_VERSION",
    "PYENV_ROOT",    "PYENV_DIR",    "HOME"};

constexpr std::size_t stdout_limit = 16 << 20;  // an answer is a few KiB; beyond this it is garbage anyway
constexpr std::size_t stderr_keep = 64 << 10;   // the end of a traceback is the part that explains it
constexpr std::size_t stderr_lines = 12;        // of which the error message quotes this many lines

auto on_error(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }
// An empty slot: the operation ignores the coroutine's cancellation.
auto uncancellable(error_code& ec) { return asio::bind_cancellation_slot(asio::cancellation_slot(), on_error(ec)); }

bool is_executable_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

std::vector<std::string> child_environment(const config::env_lookup& env) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string_view::npos) vars[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  for (const auto name : variables) {
    vars.erase(std::string(name));
    if (auto v = env(name)) vars[std::string(name)] = std::move(*v);
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// ---- the interpreter's process ---------------------------------------------------------------------------

// The interpreter, in a process group of its own (a launcher script's children with it), owned by whoever
// holds this object: it must be reaped before the object goes. Its exit is waited for with a pidfd: the exit
// becomes readiness on a descriptor the io_context already waits on, with no SIGCHLD handler (which would be
// process-wide and would race with code that reaps its own children) and no polling delay. Where pidfd_open
// is missing (Linux before 5.3, or a seccomp sandbox that forbids it) a WNOHANG poll on a timer stands in.
class child_process {
 public:
  explicit child_process(const asio::any_io_executor& ex) : out_(ex), err_(ex), pidfd_(ex) {}
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  // The last resort, when an exception or a torn-down coroutine frame skips kill_and_reap(): a blocking
  // waitpid, short because of the SIGKILL before it.
  ~child_process() {
    if (pid_ <= 0 || reaped_) return;
    ::kill(-pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }

  error_code start(const fs::path& exe, std::vector<std::string> argv, std::vector<std::string> env,
                   const fs::path& cwd);

  descriptor& out() { return out_; }
  descriptor& err() { return err_; }
  bool reaped() const { return reaped_; }

  // Until the interpreter has exited; it stays a zombie, not reaped.
  asio::awaitable<error_code> exited(bool cancellable);
  // After exited(): kills what is left of the group, then reaps the leader and returns its wait status. The
  // zombie leader keeps the group id taken, so that the kill cannot reach a stranger that reused it.
  int reap();
  // SIGKILL to the whole group, then reaped. Not cancellable: after SIGKILL the wait is short, and the
  // zombie must be reaped even if more cancellations arrive.
  asio::awaitable<void> kill_and_reap();

 private:
  bool has_exited() const;

  pid_t pid_ = -1;
  bool reaped_ = false;
  descriptor out_, err_, pidfd_;
};

error_code child_process::start(const fs::path& exe, std::vector<std::string> argv, std::vector<std::string> env,
                                const fs::path& cwd) {
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
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
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

  auto argp = pointers(argv);
  auto envp = pointers(env);
  // posix_spawnp rather than posix_spawn: with an absolute path it searches nothing, but it still runs a
  // script without a #! line with /bin/sh, as a shell would.
  const int rc = ::posix_spawnp(&pid_, exe.c_str(), &actions, &attr, argp.data(), envp.data());
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
  // The pid cannot be reused before it is reaped, so the pidfd surely names our child. A raw syscall:
  // glibc 2.36's <sys/pidfd.h> declares pidfd_open without C linkage for C++.
  if (const auto fd = ::syscall(SYS_pidfd_open, pid_, 0); fd >= 0) pidfd_.assign(static_cast<int>(fd));
  return {};
}

bool child_process::has_exited() const {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_;
}

asio::awaitable<error_code> child_process::exited(bool cancellable) {
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

int child_process::reap() {
  ::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status;
}

asio::awaitable<void> child_process::kill_and_reap() {
  if (reaped_) co_return;
  ::kill(-pid_, SIGKILL);
  co_await exited(false);
  reap();
}

// ---- collecting the answer -------------------------------------------------------------------------------

struct outcome {
  std::string out, err;
  error_code read_error;  // other than the end of the stream
  std::optional<int> status;
};

// Reads to the end of the stream. Past `limit` bytes it keeps reading (so that the child never blocks on a
// full pipe) and keeps the first `limit` bytes, or with `keep_tail` the last ones.
asio::awaitable<void> read_all(descriptor& from, std::string& into, std::size_t limit, bool keep_tail,
                               error_code& failure) {
  co_await net::accept_cancellation();
  std::array<char, 16384> buf;
  for (;;) {
    error_code ec;
    const auto n = co_await from.async_read_some(asio::buffer(buf), on_error(ec));
    into.append(buf.data(), n);
    if (into.size() > limit && keep_tail) into.erase(0, into.size() - limit);
    if (into.size() > limit) into.resize(limit);
    if (ec == asio::error::eof) co_return;
    if (ec) {
      failure = ec;
      co_return;
    }
  }
}

// Both streams to their end, then the exit status. Returns early, without a status, when cancelled.
asio::awaitable<void> collect(child_process& child, outcome& result) {
  co_await net::accept_cancellation();
  error_code out_error, err_error;
  co_await (read_all(child.out(), result.out, stdout_limit, false, out_error) &&
            read_all(child.err(), result.err, stderr_keep, true, err_error));
  result.read_error = out_error ? out_error : err_error;
  if (result.read_error) co_return;
  if (co_await child.exited(true)) co_return;
  result.status = child.reap();
}

// The deadline as an operand of ||. The operators co_spawn their operands, and a spawned coroutine hears
// only terminal cancellation unless it accepts more: a bare timer.async_wait() would ignore the total
// cancellation that the group forwards from the caller, and the group would wait for it to expire.
asio::awaitable<void> expiry(asio::steady_timer& timer) {
  co_await net::accept_cancellation();
  error_code ec;
  co_await timer.async_wait(on_error(ec));
}

std::string tail_lines(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.remove_suffix(1);
  std::size_t start = text.size();
  for (std::size_t lines = 0; start > 0 && lines < stderr_lines; --start)
    if (text[start - 1] == '\n') ++lines;
  if (start > 0) ++start;  // stopped on a newline: leave it out
  return std::string(text.substr(start));
}

error_code exit_failure(const probe_request& req, int status, const outcome& got, diagnostics& diag) {
  const auto how = WIFEXITED(status) ? fmt::format("exited with status {}", WEXITSTATUS(status))
                                     : fmt::format("was killed by signal {}", WTERMSIG(status));
  const auto err = tail_lines(got.err);
  diag.set(fmt::format("python interpreter '{}' {} in {}{}{}", req.python, how, req.working_dir.string(),
                       err.empty() ? "" : ":\n", err));
  return make_error_code(errc::python_failed);
}

std::string timeout_text(std::chrono::nanoseconds t) {
  return config::format_duration(std::chrono::duration_cast<config::duration>(t));
}

// ---- the probe ---------------------------------------------------------------------------------------------

error_code not_found(const probe_request& req, diagnostics& diag) {
  if (req.python.find('/') != std::string::npos)
    diag.set(fmt::format("python interpreter '{}' does not exist or is not executable; set packaging.python to "
                         "the interpreter ferry should ask about sys.path",
                         req.python));
  else
    diag.set(fmt::format("python interpreter '{}' was not found on PATH; set packaging.python to the interpreter "
                         "ferry should ask about sys.path (a name on PATH or a path)",
                         req.python));
  return make_error_code(errc::python_failed);
}

asio::awaitable<result<probe_answer>> probe(const probe_request& req, diagnostics& diag) {
  error_code ec;
  if (!fs::is_directory(req.working_dir, ec)) {
    diag.set(fmt::format("cannot ask python about sys.path in {}: not a directory", req.working_dir.string()));
    co_return make_error_code(errc::not_a_directory);
  }
  const auto exe = resolve_interpreter(req.python, req.working_dir, req.env);
  if (!exe) co_return not_found(req, diag);

  auto ex = co_await asio::this_coro::executor;
  child_process child(ex);
  if (const auto failed = child.start(*exe, {req.python, "-c", std::string(probe_script())},
                                      child_environment(req.env), req.working_dir)) {
    diag.set(fmt::format("cannot start python interpreter '{}' ({}): {}", req.python, exe->string(),
                         failed.message()));
    co_return make_error_code(errc::python_failed);
  }

  outcome got;
  asio::steady_timer deadline(ex, req.timeout);
  const auto first = co_await (collect(child, got) || expiry(deadline));
  co_await child.kill_and_reap();  // a no-op when collect() reaped it

  if (co_await net::cancelled()) co_return asio::error::operation_aborted;
  if (first.index() == 1) {
    diag.set(fmt::format("python interpreter '{}' did not answer within {} (packaging.discover_timeout)",
                         req.python, timeout_text(req.timeout)));
    co_return make_error_code(errc::probe_timeout);
  }
  if (got.read_error) {
    diag.set(fmt::format("reading python interpreter '{}' output: {}", req.python, got.read_error.message()));
    co_return make_error_code(errc::python_failed);
  }
  if (!got.status || !WIFEXITED(*got.status) || WEXITSTATUS(*got.status) != 0)
    co_return exit_failure(req, got.status.value_or(0), got, diag);
  co_return parse_probe_output(got.out, diag);
}

}  // namespace

std::span<const std::string_view> python_environment() { return variables; }

std::optional<fs::path> resolve_interpreter(const std::string& python, const fs::path& working_dir,
                                            const config::env_lookup& env) {
  if (python.empty()) return std::nullopt;
  error_code ec;
  const auto base = fs::absolute(working_dir, ec);
  if (ec) return std::nullopt;
  if (python.find('/') != std::string::npos) {
    auto p = (base / python).lexically_normal();
    return is_executable_file(p) ? std::optional(p) : std::nullopt;
  }
  const auto search = env("PATH").value_or("/bin:/usr/bin");
  std::string_view rest = search;
  for (;;) {
    const auto colon = rest.find(':');
    const auto dir = rest.substr(0, colon);
    auto candidate = (base / fs::path(dir.empty() ? "." : dir) / python).lexically_normal();
    if (is_executable_file(candidate)) return candidate;
    if (colon == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(colon + 1);
  }
}

asio::awaitable<result<probe_answer>> run_probe(tracing::action& parent, const probe_request& request,
                                                diagnostics& diag) {
  auto act = parent.child("ferry:packaging:probe", {{"python", request.python}});
  auto answer = co_await probe(request, diag);
  if (answer)
    act.succeed({{"executable", answer->executable}, {"version", answer->version}});
  else
    act.fail(answer.error(), diag);
  co_return answer;
}

asio::awaitable<result<probe_answer>> run_probe(tracing::action& parent, const std::string& python,
                                                const fs::path& working_dir, std::chrono::nanoseconds timeout,
                                                diagnostics& diag) {
  const probe_request request{python, working_dir, timeout};
  co_return co_await run_probe(parent, request, diag);
}

}  // namespace ferry::packaging
