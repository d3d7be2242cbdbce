#pragma once
// What ferry keeps of each cluster (`ferry cluster`): one JSON file per cluster under the XDG state dir,
// `clusters/<name>.json`, written whole (net/atomic_file.hpp) by the process that holds the cluster, and
// read by `cluster ls`, `cluster down` and a second `cluster up`. The holder's pid with the start time the
// kernel gives it tells a live holder from a stale file whose pid was reused.
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ferry::agent {

struct cluster_record {
  std::string name;
  std::string engine = "dask";
  std::string status;             // starting, ready, stopping, stopped (by `down`) or failed
  int pid = 0;                    // the holder (`ferry cluster hold`)
  std::uint64_t pid_start = 0;    // its start time in clock ticks since boot (/proc/PID/stat field 22)
  std::string scheduler;          // as the workstation reaches it: tcp://127.0.0.1:PORT
  std::string dashboard;          // http://127.0.0.1:PORT/status
  std::string scheduler_node;     // the node the scheduler runs on
  std::vector<std::string> nodes; // the nodes whose worker registered and still runs
  std::vector<std::string> created;  // the nodes made for the cluster (not taken warm): `down` ends them
  std::size_t wanted = 0;         // workers asked for
  std::string error;              // failed: why
  std::string log;                // the holder's log: the scheduler's and workers' lines
  std::int64_t started_at = 0;    // unix seconds
};

std::filesystem::path clusters_dir(const std::filesystem::path& state_dir);
std::filesystem::path record_path(const std::filesystem::path& dir, const std::string& name);

// A cluster name: letters, digits, '-', '_' and '.', not starting with '.', at most 64 characters.
bool valid_cluster_name(const std::string& name);

result<void> write_record(const std::filesystem::path& dir, const cluster_record& r, diagnostics& diag);
// none: no such cluster; an error for a file that cannot be read or parsed.
result<std::optional<cluster_record>> read_record(const std::filesystem::path& dir, const std::string& name,
                                                  diagnostics& diag);
// Every readable record, by name; an unreadable one is skipped.
std::vector<cluster_record> list_records(const std::filesystem::path& dir);
// Removes the record; with a pid, only while the record is still that holder's (a new `up` may have
// written its own meanwhile).
void remove_record(const std::filesystem::path& dir, const std::string& name, int pid = 0);

// The kernel's start time of a process (0: no such process, or one that has ended and is a zombie).
std::uint64_t process_start(int pid);
// Whether the record's holder still runs: its pid names the process that started then.
bool holder_alive(const cluster_record& r);

}  // namespace ferry::agent
