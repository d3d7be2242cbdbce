#pragma once
// Run traces as the run code writes them (tracing/trace_conventions.hpp), with answers known in advance.
// Header-only, so that bench/ can use it without GoogleTest. Run i starts at 1.7e9 + 1000 i (whole
// seconds: every figure is exact in binary) and lasts 10 s:
//   ferry:run                      0 .. 10
//     ferry:packaging:hash         0 .. 1
//     ferry:provision:node  node   0 .. 2
//     ferry:materialise node       2 .. 3
//     ferry:agent:task      node   3 .. 3 + d, d = 1 + i % 5; submitted at 3 - i % 4; failed when i % 100 == 0
//     ferry:provision:terminate    9 .. 9.5
// So per run: pending i % 4 s; provisioned 9.5 node-s, busy d; critical path provision 2, materialise 1,
// task d, run 6 - d, terminate 0.5, run 0.5.
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <string>

namespace ferry::test {

inline double synthetic_run_start(std::size_t i) { return 1.7e9 + 1000.0 * static_cast<double>(i); }
inline double synthetic_task_seconds(std::size_t i) { return 1.0 + static_cast<double>(i % 5); }
inline double synthetic_pending_seconds(std::size_t i) { return static_cast<double>(i % 4); }

inline std::string synthetic_run(std::size_t i) {
  const auto uuid = fmt::format("00000000-0000-4000-8000-{:012}", i);
  const double t0 = synthetic_run_start(i);
  const auto node = fmt::format("node-{}", i);
  std::string out;
  auto line = [&](std::string_view level, double at, std::string_view type, std::string_view status,
                  const std::string& extra) {
    out += fmt::format(
        R"({{"task_uuid":"{}","task_level":[{}],"timestamp":{:.3f},"action_type":"{}","action_status":"{}"{}}})",
        uuid, level, at, type, status, extra);
    out += '\n';
  };
  const auto on_node = fmt::format(R"(,"node":"{}")", node);
  const double d = synthetic_task_seconds(i);
  line("1", t0, action_types::run::job, "started", R"(,"argv":["python","train.py"])");
  line("2,1", t0, action_types::packaging::hash, "started", "");
  line("2,2", t0 + 1, action_types::packaging::hash, "succeeded", "");
  line("3,1", t0, action_types::provision::node, "started", on_node);
  line("3,2", t0 + 2, action_types::provision::node, "succeeded", "");
  line("4,1", t0 + 2, action_types::agent::materialise, "started", on_node);
  line("4,2", t0 + 3, action_types::agent::materialise, "succeeded", "");
  line("5,1", t0 + 3, action_types::agent::task, "started",
       on_node + fmt::format(R"(,"submitted_at":{:.3f})", t0 + 3 - synthetic_pending_seconds(i)));
  if (i % 100 == 0)
    line("5,2", t0 + 3 + d, action_types::agent::task, "failed",
         R"(,"exception":"exit_code","reason":"exit status 1")");
  else
    line("5,2", t0 + 3 + d, action_types::agent::task, "succeeded", R"(,"exit_code":0)");
  line("6,1", t0 + 9, action_types::provision::terminate, "started", on_node);
  line("6,2", t0 + 9.5, action_types::provision::terminate, "succeeded", "");
  line("7", t0 + 10, action_types::run::job, "succeeded", "");
  return out;
}

}  // namespace ferry::test
