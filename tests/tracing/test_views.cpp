#include "tracing/action_types.hpp"
#include "tracing/chrome_view.hpp"
#include "tracing/tree_view.hpp"

#include "support/temp_dir.hpp"

#include <boost/json/parse.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

namespace ferry::tracing {
namespace {

using test::temp_dir;

std::string start(std::string_view type, std::string_view level, double ts, std::string_view extra = "") {
  return fmt::format(R"({{"task_uuid":"T","task_level":[{}],"timestamp":{},"action_type":"{}","action_status":"started"{}}})",
                     level, ts, type, extra);
}
std::string end(std::string_view type, std::string_view level, double ts, std::string_view status = "succeeded") {
  return fmt::format(R"({{"task_uuid":"T","task_level":[{}],"timestamp":{},"action_type":"{}","action_status":"{}"}})",
                     level, ts, type, status);
}
// The message at [3] that says level `handed` went to a process that may never write to the trace.
std::string handoff_at_3(int handed) {
  return fmt::format(R"({{"task_uuid":"T","task_level":[3],"timestamp":1.5,"message_type":"{}","level":{}}})",
                     action_types::tracing::handoff, handed);
}

// A run with two concurrent children (overlapping in time) and a nested grandchild.
trace_set sample(temp_dir& dir) {
  const std::vector<std::string> lines = {
      start("run", "1", 100.0, R"(,"nodes":2)"), start("pack", "2,1", 100.1), start("hash", "2,2,1", 100.2),
      end("hash", "2,2,2", 100.5), start("provision", "3,1", 100.3), end("pack", "2,3", 101.0),
      end("provision", "3,2", 102.0, "failed"), end("run", "4", 103.0, "failed")};
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  diagnostics diag;
  return *read_traces({dir.write("run.jsonl", text)}, diag);
}

TEST(tree_view, draws_nesting_status_durations_and_fields) {
  temp_dir dir;
  const auto set = sample(dir);
  const auto tasks = build_task_trees(set);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].complete());
  const auto text = render_tree(tasks);
  const auto expected_lines = {"T\n", "└── run/1 ⇒ started 1970-01-01 00:01:40.000Z ⧖ 3.000s\n", "    ├── nodes: 2\n",
                               "    ├── pack/2/1 ⇒ started", "    │   ├── hash/2/2/1 ⇒ started", "⧖ 0.300s\n",
                               "    │   └── pack/2/3 ⇒ succeeded", "    ├── provision/3/1 ⇒ started",
                               "    │   └── provision/3/2 ⇒ failed", "    └── run/4 ⇒ failed"};
  std::size_t at = 0;
  for (const auto* line : expected_lines) {
    const auto found = text.find(line, at);
    ASSERT_NE(found, std::string::npos) << "missing '" << line << "' after offset " << at << " in:\n" << text;
    at = found;
  }
}

TEST(tree_view, an_action_without_end_is_shown_incomplete) {
  temp_dir dir;
  diagnostics diag;
  const auto set = *read_traces({dir.write("t.jsonl", start("run", "1", 1.0) + "\n")}, diag);
  const auto tasks = build_task_trees(set);
  EXPECT_FALSE(tasks[0].complete());
  const auto text = render_tree(tasks);
  EXPECT_NE(text.find("T  (incomplete)"), std::string::npos) << text;
  EXPECT_NE(text.find("(no end message: incomplete)"), std::string::npos) << text;
}

TEST(tree_view, a_gap_in_levels_makes_the_task_incomplete) {
  temp_dir dir;
  diagnostics diag;
  // Level [2] is missing: the child process that was handed that level never wrote it.
  const auto set = *read_traces({dir.write("t.jsonl", start("run", "1", 1.0) + "\n" + end("run", "3", 2.0) + "\n")}, diag);
  EXPECT_FALSE(build_task_trees(set)[0].complete());
}

TEST(tree_view, a_level_handed_off_and_never_used_is_not_a_gap) {
  temp_dir dir;
  diagnostics diag;
  // Level [2] went to a command that did not use eliot; the ferry:handoff message at [3] says so.
  const auto handoff = handoff_at_3(2);
  const auto set =
      *read_traces({dir.write("t.jsonl", start("run", "1", 1.0) + "\n" + handoff + "\n" + end("run", "4", 2.0) + "\n")},
                   diag);
  EXPECT_TRUE(build_task_trees(set)[0].complete());
  // A handoff naming another level does not excuse this gap.
  const auto other = handoff_at_3(5);
  const auto set2 =
      *read_traces({dir.write("t2.jsonl", start("run", "1", 1.0) + "\n" + other + "\n" + end("run", "4", 2.0) + "\n")},
                   diag);
  EXPECT_FALSE(build_task_trees(set2)[0].complete());
}

TEST(chrome_view, events_nest_properly_on_each_lane) {
  temp_dir dir;
  const auto set = sample(dir);
  const auto json = render_chrome(set, build_task_trees(set));
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::pair<std::int64_t, std::int64_t>>> lanes;
  std::map<std::string, std::int64_t> lane_of;
  int complete_events = 0;
  for (const auto& e : json.at("traceEvents").as_array()) {
    if (e.at("ph") != "X") continue;
    ++complete_events;
    const auto ts = e.at("ts").as_int64();
    const auto dur = e.at("dur").as_int64();
    lanes[{e.at("pid").as_int64(), e.at("tid").as_int64()}].emplace_back(ts, ts + dur);
    lane_of[std::string(e.at("name").as_string())] = e.at("tid").as_int64();
  }
  EXPECT_EQ(complete_events, 4);
  EXPECT_EQ(lane_of["run"], lane_of["pack"]);
  EXPECT_EQ(lane_of["pack"], lane_of["hash"]);
  EXPECT_NE(lane_of["pack"], lane_of["provision"]);  // they overlap: one lane each
  for (const auto& [lane, spans] : lanes)
    for (const auto& a : spans)
      for (const auto& b : spans) {
        const bool disjoint = a.second <= b.first || b.second <= a.first;
        const bool nested = (a.first <= b.first && b.second <= a.second) || (b.first <= a.first && a.second <= b.second);
        EXPECT_TRUE(disjoint || nested) << "overlapping spans on one lane";
      }
}

}  // namespace
}  // namespace ferry::tracing
