#pragma once
// `ferry trace VIEW` without a file: the last command's trace. Each command writes a file of its own in the
// trace directory ($XDG_STATE_HOME/ferry/traces/<time>-<pid>-<root>.jsonl); the node programs' files lie
// beside it as <stem>.node-*.jsonl (read_traces adds them), and a process that continues the command's task
// (a cluster's holder, `ferry cluster hold`) writes another file of its own, whose first message carries the
// same task_uuid. The last command is the one whose file starts latest, by its first message's timestamp,
// leaving out the commands named by `skip_prefix` (`ferry:trace:`, so that a view never reads its own trace).
#include "tracing/diagnostics.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::tracing {

struct last_trace {
  std::filesystem::path file;              // the last command's own file
  std::string action_type;                 // its root action
  double started = 0;                      // its first message's timestamp
  std::vector<std::filesystem::path> files;  // `file` first, then the other files that continue its task
};

// errc::no_trace (diag names the directory) when no file there qualifies.
result<last_trace> find_last_trace(const std::filesystem::path& dir, std::string_view skip_prefix, diagnostics& diag);

}  // namespace ferry::tracing
