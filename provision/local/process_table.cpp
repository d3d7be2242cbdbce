#include "provision/local/process_table.hpp"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ferry::provision::local {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A pidfd for `pid`, or -1. Raw syscalls: glibc 2.36's <sys/pidfd.h> lacks C linkage for C++.
int open_pidfd(int pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

bool signal_pidfd(int pidfd, int sig) { return ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0; }

class pidfd {
 public:
  explicit pidfd(int pid) : fd_(open_pidfd(pid)) {}
  ~pidfd() {
    if (fd_ >= 0) ::close(fd_);
  }
  pidfd(const pidfd&) = delete;
  pidfd& operator=(const pidfd&) = delete;
  bool valid() const { return fd_ >= 0; }
  bool kill() const { return signal_pidfd(fd_, SIGKILL); }

 private:
  int fd_;
};

}  // namespace

std::optional<process_info> parse_stat(std::string_view stat) {
  const auto open = stat.find('(');
  const auto close = stat.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return std::nullopt;
  process_info info;
  info.comm = std::string(stat.substr(open + 1, close - open - 1));
  // After the comm: field 3 (state) onwards, separated by single spaces; start time is field 22.
  std::string_view rest = stat.substr(close + 1);
  std::vector<std::string_view> fields;
  for (;;) {
    const auto begin = rest.find_first_not_of(" \n");
    if (begin == std::string_view::npos) break;
    rest.remove_prefix(begin);
    const auto end = std::min(rest.find_first_of(" \n"), rest.size());
    fields.push_back(rest.substr(0, end));
    rest.remove_prefix(end);
  }
  if (fields.size() < 20 || fields[0].empty()) return std::nullopt;
  info.state = fields[0][0];
  std::from_chars(fields[1].data(), fields[1].data() + fields[1].size(), info.ppid);
  std::from_chars(fields[19].data(), fields[19].data() + fields[19].size(), info.start_time);
  return info;
}

std::optional<process_info> read_process(int pid) {
  if (pid <= 0) return std::nullopt;
  const auto text = slurp("/proc/" + std::to_string(pid) + "/stat");
  if (text.empty()) return std::nullopt;
  return parse_stat(text);
}

std::uint64_t namespace_id(const std::filesystem::path& ns_file) {
  struct stat st {};
  return ::stat(ns_file.c_str(), &st) == 0 ? st.st_ino : 0;
}

std::uint64_t namespace_id(int pid, std::string_view kind) {
  return namespace_id(std::filesystem::path("/proc") / std::to_string(pid) / "ns" / std::string(kind));
}

namespace {

// Calls `visit(pid)` for every process in /proc.
template <class Visit>
void for_each_pid(Visit visit) {
  DIR* proc = ::opendir("/proc");
  if (!proc) return;
  while (const auto* entry = ::readdir(proc)) {
    int pid = 0;
    const std::string_view name(entry->d_name);
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec == std::errc() && end == name.data() + name.size()) visit(pid);
  }
  ::closedir(proc);
}

}  // namespace

std::vector<descendant> descendants_of(int pid) {
  std::vector<descendant> all;
  for_each_pid([&](int p) {
    if (const auto info = read_process(p); info && info->state != 'Z') all.push_back({p, info->ppid});
  });
  std::vector<descendant> out;
  std::vector<int> frontier{pid};
  while (!frontier.empty()) {
    const int parent = frontier.back();
    frontier.pop_back();
    for (const auto& d : all) {
      if (d.parent != parent) continue;
      out.push_back(d);
      frontier.push_back(d.pid);
    }
  }
  return out;
}

std::vector<int> processes_in_namespace(std::string_view kind, std::uint64_t id) {
  std::vector<int> out;
  if (id == 0 || id == namespace_id(::getpid(), kind)) return out;
  for_each_pid([&](int pid) {
    if (namespace_id(pid, kind) == id) out.push_back(pid);
  });
  return out;
}

bool kill_if_member(int pid, std::string_view kind, std::uint64_t id) {
  if (id == 0 || id == namespace_id(::getpid(), kind)) return false;
  const pidfd fd(pid);
  // While the pidfd's process lives, /proc/PID is that process: the check below is about the same one.
  return fd.valid() && namespace_id(pid, kind) == id && fd.kill();
}

bool kill_if_started_at(int pid, std::uint64_t start_time, bool whole_group) {
  const pidfd fd(pid);
  const auto info = read_process(pid);
  if (!fd.valid() || !info || info->start_time != start_time || info->state == 'Z') return false;
  // The leader was started with setsid, so its group id is its pid; a live leader keeps that id ours.
  if (whole_group) return ::kill(-pid, SIGKILL) == 0;
  return fd.kill();
}

bool kill_if_child_of(const descendant& d) {
  const pidfd fd(d.pid);
  const auto info = read_process(d.pid);
  return fd.valid() && info && info->ppid == d.parent && info->state != 'Z' && fd.kill();
}

}  // namespace ferry::provision::local
