#pragma once
// Hand-built traces with answers worked out by hand (see tests/tracing/test_stats.cpp), for the stats, the
// HTML view and the CLI. Header-only, like synthetic_runs.hpp.
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace ferry::test {

// One eliot message of task "M"; `extra` holds more fields, with a leading comma.
inline std::string msg(std::string_view level, double ts, std::string_view type, std::string_view status,
                       std::string_view extra = "", std::string_view uuid = "M") {
  return fmt::format(R"({{"task_uuid":"{}","task_level":[{}],"timestamp":{},"action_type":"{}","action_status":"{}"{}}})",
                     uuid, level, ts, type, status, extra) + "\n";
}

// A map from 1000 to 1020 with two nodes and four tasks:
//   ferry:packaging:hash        1000 .. 1002
//   ferry:provision:node n1     1001 .. 1005 (create 1001 .. 1002, wait_ssh 1002 .. 1005)
//   ferry:provision:node n2     1001 .. 1006
//   task t1 on n1               1005 .. 1010, submitted 1000: pending 5
//   task t2 on n2               1006 .. 1012, submitted 1000: pending 6
//   task t3 on n1               1010 .. 1018, submitted 1000: pending 10
//   task t4 on n2               1012 .. 1016, submitted 1000: pending 12, failed
//   ferry:provision:terminate n2  1016 .. 1017
inline std::string map_trace() {
  const std::string n1 = R"(,"node":"n1")", n2 = R"(,"node":"n2")", sub = R"(,"submitted_at":1000.0)";
  return msg("1", 1000, action_types::map::job, "started", R"(,"inputs":4)") +
         msg("2,1", 1000, action_types::packaging::hash, "started") +
         msg("2,2", 1002, action_types::packaging::hash, "succeeded") +
         msg("3,1", 1001, action_types::provision::node, "started", n1) +
         msg("3,2,1", 1001, action_types::provision::create, "started") +
         msg("3,2,2", 1002, action_types::provision::create, "succeeded") +
         msg("3,3,1", 1002, action_types::readiness::wait_ssh, "started") +
         msg("3,3,2", 1005, action_types::readiness::wait_ssh, "succeeded") +
         msg("3,4", 1005, action_types::provision::node, "succeeded") +
         msg("4,1", 1001, action_types::provision::node, "started", n2) +
         msg("4,2", 1006, action_types::provision::node, "succeeded") +
         msg("5,1", 1005, action_types::agent::task, "started", n1 + sub) +
         msg("5,2", 1010, action_types::agent::task, "succeeded") +
         msg("6,1", 1006, action_types::agent::task, "started", n2 + sub) +
         msg("6,2", 1012, action_types::agent::task, "succeeded") +
         msg("7,1", 1010, action_types::agent::task, "started", n1 + sub) +
         msg("7,2", 1018, action_types::agent::task, "succeeded") +
         msg("8,1", 1012, action_types::agent::task, "started", n2 + sub) +
         msg("8,2", 1016, action_types::agent::task, "failed", R"(,"exception":"exit_code","reason":"exit status 3")") +
         msg("9,1", 1016, action_types::provision::terminate, "started", n2) +
         msg("9,2", 1017, action_types::provision::terminate, "succeeded") +
         msg("10", 1020, action_types::map::job, "succeeded");
}

// A map that Ctrl-C interrupted, as action::fail writes a cancellation (failed, reason "cancelled"):
//   task a on n1  3000 .. 3002 succeeded; inside it three ferry:materialise:attempt, two of them
//                 cancelled (a race the third won: 3000 .. 3000.5, 3000 .. 3000.6) and one succeeded
//   task b on n1  3002 .. 3004 failed (exit status 1)
//   task c on n2  3001 .. 3005 cancelled by the interrupt
//   the map       3000 .. 3005 cancelled
inline std::string interrupted_map_trace() {
  const std::string n1 = R"(,"node":"n1")", n2 = R"(,"node":"n2")";
  const std::string cancelled = R"(,"exception":"cancelled","reason":"cancelled")";
  return msg("1", 3000, action_types::map::job, "started", R"(,"inputs":3)") +
         msg("2,1", 3000, action_types::agent::task, "started", n1) +
         msg("2,2,1", 3000, action_types::node::attempt, "started", R"(,"attempt":1)") +
         msg("2,2,2", 3000.5, action_types::node::attempt, "failed", cancelled) +
         msg("2,3,1", 3000, action_types::node::attempt, "started", R"(,"attempt":2)") +
         msg("2,3,2", 3000.6, action_types::node::attempt, "failed", cancelled) +
         msg("2,4,1", 3000, action_types::node::attempt, "started", R"(,"attempt":3)") +
         msg("2,4,2", 3000.4, action_types::node::attempt, "succeeded") +
         msg("2,5", 3002, action_types::agent::task, "succeeded", R"(,"exit_code":0)") +
         msg("3,1", 3002, action_types::agent::task, "started", n1) +
         msg("3,2", 3004, action_types::agent::task, "failed", R"(,"exception":"exit_code","reason":"exit status 1")") +
         msg("4,1", 3001, action_types::agent::task, "started", n2) +
         msg("4,2", 3005, action_types::agent::task, "failed", cancelled) +
         msg("5", 3005, action_types::map::job, "failed", cancelled);
}

}  // namespace ferry::test
