#pragma once
// What /proc says about processes: enough to tell whether a local node's sshd still runs (and is the
// process ferry started, not a later one that got its pid), and to find every process that belongs to a
// node, so that terminating it ends them all. sshd puts each connection in a session of its own, so the
// sshd's process group alone would miss the commands running on the node; its namespaces do not.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::provision::local {

struct process_info {
  char state = '?';             // R, S, D, Z (zombie), ...
  std::string comm;             // the executable's name, at most 15 characters
  std::uint64_t start_time = 0; // clock ticks after boot: with the pid, names one process for good
  int ppid = 0;
};

std::optional<process_info> read_process(int pid);

// The contents of /proc/PID/stat, parsed (the comm may hold spaces and parentheses).
std::optional<process_info> parse_stat(std::string_view stat);

// The inode of a namespace: of /proc/PID/ns/KIND ("mnt", "net"), or of a bind-mounted namespace file such
// as /run/netns/NAME; 0 when it cannot be read (the process is gone or a zombie).
std::uint64_t namespace_id(int pid, std::string_view kind);
std::uint64_t namespace_id(const std::filesystem::path& ns_file);

// Every process whose KIND namespace is `id` (never this process's own namespace: 0 matches nothing).
std::vector<int> processes_in_namespace(std::string_view kind, std::uint64_t id);

// Every descendant of `pid` (children first found, then theirs), with the parent each was found under.
struct descendant {
  int pid = 0;
  int parent = 0;
};
std::vector<descendant> descendants_of(int pid);

// Sends SIGKILL to `pid` if it is still in the KIND namespace `id` (or, with id 0, still the process that
// started at `start_time`). Through a pidfd: the check and the kill reach the same process even when pids
// are being reused meanwhile.
bool kill_if_member(int pid, std::string_view kind, std::uint64_t id);
bool kill_if_started_at(int pid, std::uint64_t start_time, bool whole_group);
bool kill_if_child_of(const descendant& d);

}  // namespace ferry::provision::local
