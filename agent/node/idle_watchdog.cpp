#include "agent/node/idle_watchdog.hpp"

#include "agent/node/error.hpp"
#include "agent/node/make_dirs.hpp"
#include "agent/node/plan_reader.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <set>
#include <string_view>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace ferry::agent::node {
namespace {

namespace json = boost::json;
using namespace plan_reading;
using std::chrono::milliseconds;

constexpr std::string_view loop_word = "watchdog-loop";

std::string default_state_dir() {
  const char* xdg = std::getenv("XDG_STATE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/ferry";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.local/state/ferry";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool write_text(const std::string& path, std::string_view text) {
  const auto temp = fmt::format("{}.{}", path, ::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return false;
  }
  return ::rename(temp.c_str(), path.c_str()) == 0;
}

// A process that runs: a zombie (ended, not yet reaped) does not count.
bool running(long pid) {
  if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)) return false;
  const auto stat = read_text(fmt::format("/proc/{}/stat", pid));
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

// The pid of the watchdog that runs for `dir`, or 0.
long running_watchdog(const std::string& dir) {
  const long pid = std::strtol(read_text(dir + "/watchdog.pid").c_str(), nullptr, 10);
  if (!running(pid)) return 0;
  auto cmdline = read_text(fmt::format("/proc/{}/cmdline", pid));
  return cmdline.find(loop_word) != std::string::npos && cmdline.find(dir) != std::string::npos ? pid : 0;
}

// Ends the watchdog's session (its stop command too, if one runs) and waits for it to go, a little.
void stop_watchdog(long pid) {
  ::kill(-static_cast<pid_t>(pid), SIGTERM);
  for (int i = 0; i < 200 && running(pid); ++i) std::this_thread::sleep_for(milliseconds(10));
}

std::string own_path() {
  char self[4096] = {};
  const auto n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::string(self, static_cast<std::size_t>(n)) : std::string();
}

// The watchdog, detached: a session of its own, stdin from /dev/null, output to the log, no other
// descriptor (the SSH channel must close when the installing command ends). Its pid, or -1.
pid_t spawn_loop(const std::string& dir) {
  const auto log = dir + "/watchdog.log";
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // `ferry-node watchdog` holds TERM back while it works; the watchdog must not inherit that.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::setsid();
  const int in = ::open("/dev/null", O_RDONLY);
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (in < 0 || out < 0) ::_exit(127);
  ::dup2(in, 0);
  ::dup2(out, 1);
  ::dup2(out, 2);
  for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  ::execl("/proc/self/exe", "ferry-node", std::string(loop_word).c_str(), dir.c_str(), static_cast<char*>(nullptr));
  ::_exit(127);
}

// ---- the loop ----

volatile std::sig_atomic_t terminated = 0;

void on_term(int) { terminated = 1; }

void say(std::string_view text) {
  const auto now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::fprintf(stdout, "%s watchdog[%d]: %.*s\n", stamp, static_cast<int>(::getpid()), static_cast<int>(text.size()),
               text.data());
  std::fflush(stdout);
}

void touch(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::futimens(fd, nullptr);
    ::close(fd);
  }
}

// Whether an SSH server still holds the command whose group `pid` leads. Its shell is sshd's child; when
// that sshd goes (killed, crashed), the shell is handed to init and runs on with nobody to read its output
// or to end it. A process that cannot be read is not judged.
bool held_by_sshd(long pid) {
  for (int depth = 0; depth < 64; ++depth) {
    const auto stat = read_text(fmt::format("/proc/{}/stat", pid));
    const auto open = stat.find('(');
    const auto close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 4 >= stat.size()) return true;
    const std::string_view comm(stat.data() + open + 1, close - open - 1);
    if (depth > 0 && (comm == "sshd" || comm == "sshd-session" || comm == "dropbear")) return true;
    const long parent = std::strtol(stat.c_str() + close + 4, nullptr, 10);  // after ") S "
    if (parent <= 1) return false;
    pid = parent;
  }
  return true;
}

// Commands whose SSH session died: TERM to the group when first seen, KILL a tick later if it still runs.
class orphan_reaper {
 public:
  void check(long pid) {
    if (!termed_.contains(pid)) {
      if (held_by_sshd(pid)) return;
      say(fmt::format("the command of process group {} lost its SSH session: TERM", pid));
      ::kill(-static_cast<pid_t>(pid), SIGTERM);
      termed_.insert(pid);
      return;
    }
    say(fmt::format("process group {} outlived its TERM: KILL", pid));
    ::kill(-static_cast<pid_t>(pid), SIGKILL);
  }
  void forget(long pid) { termed_.erase(pid); }

 private:
  std::set<long> termed_;
};

// Live markers; the markers of processes that are gone are removed, and the node counts as used now.
int busy_markers(const std::string& dir, orphan_reaper& reaper) {
  int busy = 0;
  DIR* d = ::opendir((dir + "/busy").c_str());
  if (!d) return 0;
  while (const auto* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const long pid = std::strtol(e->d_name, nullptr, 10);
    if (running(pid)) {
      ++busy;
      reaper.check(pid);
    } else {
      reaper.forget(pid);
      ::unlink((dir + "/busy/" + e->d_name).c_str());
      touch(dir + "/last-used");
    }
  }
  ::closedir(d);
  return busy;
}

// Sleeps for `d`, or less when SIGTERM comes.
void pause_for(milliseconds d) {
  timespec left{static_cast<time_t>(d.count() / 1000), static_cast<long>(d.count() % 1000) * 1'000'000};
  while (!terminated && ::nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

int run_stop_command(const std::string& command, const std::string& reason) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("FERRY_STOP_REASON", reason.c_str(), 1);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return pid < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

long long whole_seconds(std::int64_t ms) { return std::max<long long>(1, (ms + 999) / 1000); }

}  // namespace

std::string watchdog_line(const watchdog_request& r) {
  return json::serialize(json::object{{"watchdog", json::object{{"task_id", r.task_id},
                                                                {"state_dir", r.state_dir},
                                                                {"idle_timeout_ms", r.idle_timeout_ms},
                                                                {"interval_ms", r.interval_ms},
                                                                {"stop_command", r.stop_command}}}}) +
         "\n";
}

result<watchdog_request> parse_watchdog_line(std::string_view line, diagnostics& diag) {
  json::error_code jec;
  const auto doc = json::parse(line, jec);
  if (jec) return bad(diag, fmt::format("the watchdog plan is not JSON: {}", jec.message()));
  const auto* top = object_of(doc);
  const auto* inner = top && top->size() == 1 ? top->if_contains("watchdog") : nullptr;
  if (!inner || !object_of(*inner)) return bad(diag, "the watchdog plan is not {\"watchdog\":{...}}");
  reader r{*object_of(*inner), "watchdog", diag, {}};
  watchdog_request out;
  out.task_id = r.text("task_id");
  out.state_dir = r.text("state_dir");
  out.idle_timeout_ms = static_cast<std::int64_t>(std::min<std::uint64_t>(r.number("idle_timeout_ms"), 1ull << 40));
  out.interval_ms = static_cast<std::int64_t>(std::min<std::uint64_t>(r.number("interval_ms"), 1ull << 40));
  out.stop_command = r.text("stop_command");
  if (r.ec) return r.ec;
  if (!out.state_dir.empty() && out.state_dir.front() != '/')
    return bad(diag, fmt::format("the watchdog's state directory '{}' is not absolute", out.state_dir));
  return out;
}

result<std::string> set_watchdog(const watchdog_request& request, diagnostics& diag) {
  const auto dir = request.state_dir.empty() ? default_state_dir() : request.state_dir;
  if (!make_dirs(dir + "/busy", 0777)) {
    diag.set(fmt::format("cannot create {}/busy: {}", dir, std::strerror(errno)));
    return make_error_code(errc::cache_failed);
  }
  const long pid = running_watchdog(dir);
  if (request.idle_timeout_ms <= 0 || request.stop_command.empty()) {
    if (pid) stop_watchdog(pid);
    ::unlink((dir + "/watchdog.pid").c_str());
    return std::string(pid ? "stopped" : "none");
  }
  const auto settings = json::serialize(json::object{{"idle_timeout_ms", request.idle_timeout_ms},
                                                     {"interval_ms", std::max<std::int64_t>(request.interval_ms, 1)},
                                                     {"stop_command", request.stop_command},
                                                     {"program", own_path()}});
  if (pid && read_text(dir + "/watchdog.json") == settings) return std::string("unchanged");
  if (pid) stop_watchdog(pid);
  if (!write_text(dir + "/watchdog.json", settings)) {
    diag.set(fmt::format("cannot write {}/watchdog.json: {}", dir, std::strerror(errno)));
    return make_error_code(errc::cache_failed);
  }
  const pid_t started = spawn_loop(dir);
  if (started < 0 || !write_text(dir + "/watchdog.pid", std::to_string(started))) {
    diag.set(fmt::format("cannot start the watchdog in {}: {}", dir, std::strerror(errno)));
    return make_error_code(errc::cache_failed);
  }
  return std::string(pid ? "replaced" : "started");
}

int watchdog_loop(const std::string& dir) {
  struct sigaction term {};
  term.sa_handler = on_term;  // no SA_RESTART: the sleep ends at once
  ::sigaction(SIGTERM, &term, nullptr);
  json::error_code jec;
  const auto doc = json::parse(read_text(dir + "/watchdog.json"), jec);
  const auto* o = jec ? nullptr : doc.if_object();
  const auto* timeout = o ? o->if_contains("idle_timeout_ms") : nullptr;
  const auto* every = o ? o->if_contains("interval_ms") : nullptr;
  const auto* stop = o ? o->if_contains("stop_command") : nullptr;
  if (!timeout || !timeout->is_int64() || !every || !every->is_int64() || !stop || !stop->is_string()) {
    say(fmt::format("cannot read {}/watchdog.json: not watching", dir));
    return 1;
  }
  const auto idle_timeout = milliseconds(timeout->get_int64());
  const auto interval = milliseconds(std::max<std::int64_t>(1, every->get_int64()));
  const std::string stop_command(stop->get_string());
  const auto last_used = dir + "/last-used";
  struct stat st {};
  if (::stat(last_used.c_str(), &st) != 0) touch(last_used);
  say(fmt::format("watching: the node stops itself after {}s without commands, checked every {:.3f}s",
                  whole_seconds(idle_timeout.count()), static_cast<double>(interval.count()) / 1000.0));
  orphan_reaper reaper;
  for (;;) {
    pause_for(interval);
    if (terminated) {
      say("ended by SIGTERM");
      return 0;
    }
    if (busy_markers(dir, reaper) > 0) continue;
    if (::stat(last_used.c_str(), &st) != 0) {
      touch(last_used);
      continue;
    }
    const auto used = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec) +
                                                            std::chrono::nanoseconds(st.st_mtim.tv_nsec));
    const auto idle = std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now() - used);
    if (idle < idle_timeout) continue;
    const auto why = fmt::format("idle for {}s with no command running (nodes.idle_timeout {}s)", idle.count() / 1000,
                                 whole_seconds(idle_timeout.count()));
    say(why + ": stopping the node");
    const int status = run_stop_command(stop_command, "stopped itself: " + why);
    if (status == 0) {
      say("stop command done");
      return 0;
    }
    say(fmt::format("the stop command failed with exit status {}: trying again after another {}s", status,
                    whole_seconds(idle_timeout.count())));
    touch(last_used);
  }
}

}  // namespace ferry::agent::node
