#pragma once
// `ferry-node watchdog`: the idle watchdog of a node that stops itself (nodes.idle_timeout), so that a node
// ferry forgets, or that outlives the workstation that made it, still ends.
//
// The state dir (`${XDG_STATE_HOME:-$HOME/.local/state}/ferry` by default) holds:
// - `busy/<pid>`: one marker per command ferry runs on the node, named by the pid of the process that runs
//   it (written by the command's own shell: agent/provide/node_watchdog.hpp). A marker counts while that process
//   runs (a zombie does not); once it is gone the watchdog removes the marker and counts the node as used
//   at that moment.
// - `last-used`: its mtime is when a command last started, or was last seen to have ended.
// - `watchdog.json` (the settings and the program's own path), `watchdog.pid`, `watchdog.log`.
//
// The watchdog is this program, detached in a session of its own (so that sshd ending the installing
// session does not end it), with no descriptor of the SSH channel (so that the channel closes). Every
// interval it looks: no live marker, and `last-used` older than the idle timeout, means the node is idle,
// and it logs why and runs the stop command (`/bin/sh -c`, with FERRY_STOP_REASON set). A stop command
// that fails is tried again after another idle timeout.
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::agent::node {

struct watchdog_request {
  std::string task_id;       // eliot's serialised task id the node's actions continue
  std::string state_dir;     // empty: ${XDG_STATE_HOME:-$HOME/.local/state}/ferry
  std::int64_t idle_timeout_ms = 0;  // 0: no watchdog (one running is stopped)
  std::int64_t interval_ms = 0;
  std::string stop_command;  // empty: no watchdog
};

std::string watchdog_line(const watchdog_request& request);
result<watchdog_request> parse_watchdog_line(std::string_view line, diagnostics& diag);

// Starts the watchdog, or leaves it alone when the same one (same settings, same program) runs already,
// or replaces one that differs; with no idle timeout or stop command, stops one that runs. The outcome:
// "started", "replaced", "unchanged", "stopped" or "none".
result<std::string> set_watchdog(const watchdog_request& request, diagnostics& diag);

// The watchdog's loop, in the detached process (`ferry-node watchdog-loop STATE_DIR`). Returns its exit code.
int watchdog_loop(const std::string& state_dir);

}  // namespace ferry::agent::node
