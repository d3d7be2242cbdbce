#include "agent/node/lease_run.hpp"

#include "agent/node/lease_watch.hpp"
#include "agent/node/make_dirs.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <string>
#include <string_view>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ferry::agent::node {
namespace {

using namespace std::chrono_literals;

constexpr int kept_later_exit = 3;
// How often lease-run looks whether the group has gone once the command itself has ended.
constexpr auto group_poll = 100ms;

int say(int code, const std::string& text) {
  std::fprintf(stderr, "ferry-node: %s\n", text.c_str());
  return code;
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string dir_name(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The file's text, up to a small bound: a lease file holds one number.
std::optional<std::int64_t> read_expiry(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[64];
  std::size_t size = 0;
  for (;;) {
    const auto n = ::read(fd, buffer + size, sizeof buffer - size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size += static_cast<std::size_t>(n);
    if (size == sizeof buffer) break;
  }
  ::close(fd);
  return parse_expiry(std::string_view(buffer, size));
}

// ---- lease-set ----

int write_expiry(const std::string& file, std::int64_t value) {
  const auto temp = fmt::format("{}/.{}.{}", dir_name(file), base_name(file), ::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return say(1, fmt::format("cannot write {}: {}", temp, std::strerror(errno)));
  const auto text = fmt::format("{}\n", value);
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int saved = errno;
  if (::close(fd) != 0 || !written) {
    ::unlink(temp.c_str());
    return say(1, fmt::format("cannot write {}: {}", temp, std::strerror(written ? errno : saved)));
  }
  if (::rename(temp.c_str(), file.c_str()) != 0) {
    const int e = errno;
    ::unlink(temp.c_str());
    return say(1, fmt::format("cannot rename {} to {}: {}", temp, file, std::strerror(e)));
  }
  return 0;
}

// ---- lease-run ----

struct run_args {
  std::string file;
  std::chrono::milliseconds grace = 5s;
  char** argv = nullptr;  // null-terminated
};

std::optional<run_args> parse_run_args(int argc, char** argv, std::string& why) {
  run_args out;
  int i = 2;
  for (; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    const std::string_view a = argv[i];
    if (a == "--grace" && i + 1 < argc) {
      const auto g = parse_expiry(argv[++i]);
      if (!g || *g > 86400) {
        why = fmt::format("--grace {}: not a whole number of seconds (at most a day)", argv[i]);
        return std::nullopt;
      }
      out.grace = std::chrono::seconds(*g);
    } else if (out.file.empty() && !a.empty() && a[0] != '-') {
      out.file = a;
    } else {
      why = fmt::format("unexpected argument {}", a);
      return std::nullopt;
    }
  }
  if (out.file.empty() || i + 1 >= argc) {
    why = "usage: ferry-node lease-run FILE [--grace SECONDS] -- COMMAND [ARG...]";
    return std::nullopt;
  }
  out.argv = argv + i + 1;
  return out;
}

// The signals lease-run waits for instead of handling them: forwarded ones, and the child's end.
sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&set, sig);
  return set;
}

[[noreturn]] void exec_child(char** argv, const sigset_t& old_mask, pid_t parent) {
  ::setpgid(0, 0);
  // Ended with lease-run: ferry's KILL after its grace reaches lease-run's group, not this one.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE}) std::signal(sig, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ::execvp(argv[0], argv);
  const int e = errno;
  std::fprintf(stderr, "ferry-node: cannot run %s: %s\n", argv[0], std::strerror(e));
  ::_exit(e == ENOENT ? 127 : 126);
}

// The command's own end, as lease-run's: its code, or its signal raised here.
int pass_on(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  const int sig = WTERMSIG(status);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // the command's core is its own; lease-run's would be noise
  std::signal(sig, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(sig);
  return 128 + sig;
}

bool group_alive(pid_t group) { return ::kill(-group, 0) == 0 || errno == EPERM; }

}  // namespace

int lease_set(int argc, char** argv) {
  if (argc != 4) return say(2, "usage: ferry-node lease-set FILE EXPIRES_AT");
  const std::string file = argv[2];
  const auto lease = base_name(file);
  if (!lease_id_valid(lease))
    return say(2, fmt::format("{}: not a lease id (letters, digits and '-' only)", lease));
  const auto value = parse_expiry(argv[3]);
  if (!value || std::string_view(argv[3]).back() == '\n')
    return say(2, fmt::format("{}: not an expiry (whole seconds since the epoch)", argv[3]));
  const auto dir = dir_name(file);
  if (!make_dirs(dir, 0700)) return say(1, fmt::format("cannot make {}: {}", dir, std::strerror(errno)));
  // One lease-set at a time per directory: the comparison and the rename go together.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || ::flock(dir_fd, LOCK_EX) != 0) return say(1, fmt::format("cannot lock {}: {}", dir, std::strerror(errno)));
  int code = 0;
  const auto current = read_expiry(file);
  if (current && *current > *value) {
    code = say(kept_later_exit,
               fmt::format("lease {} already expires at {}, after {}: kept", lease, *current, *value));
  } else if (!current || *current != *value) {
    code = write_expiry(file, *value);
  }
  ::close(dir_fd);
  return code;
}

int lease_run(int argc, char** argv) {
  std::string why;
  const auto args = parse_run_args(argc, argv, why);
  if (!args) return say(2, why);
  const auto lease = base_name(args->file);
  if (!lease_id_valid(lease))
    return say(2, fmt::format("{}: not a lease id (letters, digits and '-' only)", lease));
  lease_watch watch(args->grace);
  const auto first = read_expiry(args->file);
  if (!first) return say(2, fmt::format("lease {}: {} cannot be read: the command is not started", lease, args->file));
  watch.read(*first);

  const sigset_t watched = watched_signals();
  sigset_t old_mask;
  ::sigprocmask(SIG_BLOCK, &watched, &old_mask);
  // The group's orphans come here to be reaped, so that its zombies never keep it alive while lease-run
  // waits for it to go (a node's PID 1 may reap nothing).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) return say(1, fmt::format("cannot start {}: {}", args->argv[0], std::strerror(errno)));
  if (child == 0) exec_child(args->argv, old_mask, parent);
  ::setpgid(child, child);  // as the child does: whichever runs first, the group exists before a kill

  std::optional<int> status;
  bool stopping = false;  // a TERM went to the group: lease-run waits for all of it to go
  for (;;) {
    if (status && (!stopping || !group_alive(child))) break;
    const auto step = watch.next(std::chrono::system_clock::now(), std::chrono::steady_clock::now());
    if (step.action == lease_action::term) {
      ::kill(-child, SIGTERM);
      watch.expire(std::chrono::steady_clock::now());
      stopping = true;
      continue;
    }
    if (step.action == lease_action::kill) {
      ::kill(-child, SIGKILL);
      watch.killed();
      continue;
    }
    auto wait = status ? std::min<std::chrono::milliseconds>(step.wait, group_poll) : step.wait;
    timespec timeout{static_cast<time_t>(wait.count() / 1000), static_cast<long>(wait.count() % 1000) * 1000000L};
    siginfo_t info;
    const int sig = ::sigtimedwait(&watched, &info, &timeout);
    if (sig == SIGCHLD) {
      // The command, and the orphans of its group that came to lease-run (the subreaper) as they end.
      int s = 0;
      for (pid_t pid; (pid = ::waitpid(-1, &s, WNOHANG)) > 0;)
        if (pid == child) status = s;
    } else if (sig > 0) {
      ::kill(-child, sig);
      watch.signalled(std::chrono::steady_clock::now());
      stopping = true;
    }
    if (const auto now = read_expiry(args->file)) watch.read(*now);
  }
  if (watch.expired()) {
    std::fprintf(stderr, "ferry-node: lease %s expired at %lld: command ended\n", lease.c_str(),
                 static_cast<long long>(*watch.expires_at()));
    return lease_expired_exit;
  }
  return pass_on(*status);
}

}  // namespace ferry::agent::node
