#include "tracing/action_types.hpp"
#include "tracing/chrome_view.hpp"
#include "tracing/error.hpp"
#include "tracing/last_trace.hpp"
#include "tracing/otlp_view.hpp"
#include "tracing/tree_view.hpp"

#include "support/sample_traces.hpp"
#include "support/temp_dir.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
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

// A map of ten tasks, each with a step inside: 5 and 9 failed, 7 cancelled, the rest succeeded.
trace_set ten_tasks(temp_dir& dir) {
  std::string text = test::msg("1", 0, action_types::map::job, "started", "", "T");
  for (int i = 1; i <= 10; ++i) {
    const auto lv = std::to_string(i + 1);
    const std::string ending = i == 5 || i == 9 ? "failed" : i == 7 ? "failed" : "succeeded";
    const std::string why = i == 5 || i == 9 ? R"(,"exception":"exit_code","reason":"exit status 1")"
                            : i == 7        ? R"(,"exception":"cancelled","reason":"cancelled")"
                                            : "";
    text += test::msg(lv + ",1", i, action_types::agent::task, "started", fmt::format(R"(,"task":{})", i), "T");
    text += test::msg(lv + ",2,1", i, action_types::agent::materialise, "started", "", "T");
    text += test::msg(lv + ",2,2", i + 0.5, action_types::agent::materialise, "succeeded", "", "T");
    text += test::msg(lv + ",3", i + 1, action_types::agent::task, ending, why, "T");
  }
  text += test::msg("12", 20, action_types::map::job, "succeeded", "", "T");
  diagnostics diag;
  return *read_traces({dir.write("map.jsonl", text)}, diag);
}

TEST(tree_view, repeated_siblings_fold_and_failures_and_cancellations_stay_in_view) {
  temp_dir dir;
  const auto set = ten_tasks(dir);
  const auto tasks = build_task_trees(set);
  const auto folded = render_tree(tasks);
  // Tasks 1, 2, 3, the first failed (5) and the first cancelled (7) drawn; 4, 6, 8, 9 and 10 counted.
  for (int shown : {1, 2, 3, 5, 7}) EXPECT_NE(folded.find(fmt::format("task: {}\n", shown)), std::string::npos) << shown;
  for (int hidden : {4, 6, 8, 9, 10})
    EXPECT_EQ(folded.find(fmt::format("task: {}\n", hidden)), std::string::npos) << hidden << folded;
  EXPECT_NE(folded.find(fmt::format("… 5 more {} like these: 1 failed, 4 succeeded (--all shows every one)",
                                    action_types::agent::task)),
            std::string::npos)
      << folded;
  EXPECT_NE(folded.find("⇒ cancelled"), std::string::npos) << folded;
  // The fold line comes after the last task drawn, and the map's end still closes the tree.
  EXPECT_LT(folded.find("task: 7\n"), folded.find("… 5 more"));
  EXPECT_NE(folded.find(fmt::format("└── {}/12 ⇒ succeeded", action_types::map::job)), std::string::npos) << folded;

  const auto all = render_tree(tasks, {.all = true});
  for (int i = 1; i <= 10; ++i) EXPECT_NE(all.find(fmt::format("task: {}\n", i)), std::string::npos) << i;
  EXPECT_EQ(all.find("more"), std::string::npos);
  EXPECT_LT(std::count(folded.begin(), folded.end(), '\n'), std::count(all.begin(), all.end(), '\n') - 20);
}

TEST(tree_view, a_few_alike_siblings_are_not_folded) {
  temp_dir dir;
  const auto set = ten_tasks(dir);
  const auto tasks = build_task_trees(set);
  EXPECT_EQ(render_tree(tasks, {.shown_alike = 8}).find("more"), std::string::npos);
}

TEST(views, a_cancellation_is_no_error_in_chrome_and_otlp) {
  temp_dir dir;
  diagnostics diag;
  const auto set = *read_traces({dir.write("i.jsonl", test::interrupted_map_trace())}, diag);
  const auto tasks = build_task_trees(set);
  std::map<std::string, int> categories;
  const auto chrome = render_chrome(set, tasks);
  for (const auto& e : chrome.at("traceEvents").as_array())
    if (e.at("ph") == "X") ++categories[std::string(e.at("cat").as_string())];
  EXPECT_EQ(categories["cancelled"], 4);  // two attempts, task c and the map
  EXPECT_EQ(categories["failed"], 1);     // task b
  int errors = 0, cancelled = 0, unset = 0;
  const auto otlp = render_otlp(set, tasks);
  for (const auto& line : otlp.lines) {
    const auto request = boost::json::parse(line);
    for (const auto& rs : request.at("resourceSpans").as_array())
      for (const auto& ss : rs.at("scopeSpans").as_array())
        for (const auto& span : ss.at("spans").as_array()) {
          const auto& status = span.at("status").as_object();
          const bool is_cancelled = boost::json::serialize(span).find("ferry.cancelled") != std::string::npos;
          if (status.contains("code") && status.at("code") == 2) ++errors;
          if (!status.contains("code")) ++unset;
          if (is_cancelled) {
            ++cancelled;
            EXPECT_FALSE(status.contains("code")) << boost::json::serialize(span);
            EXPECT_EQ(boost::json::serialize(span).find("\"exception\""), std::string::npos);
          }
        }
  }
  EXPECT_EQ(errors, 1);
  EXPECT_EQ(cancelled, 4);
  EXPECT_EQ(unset, 4);
}

// The trace directory as commands leave it: a run with a node's file, a cluster holder continuing the
// run's task in a file of its own, and later trace views' own files.
TEST(last_trace, the_newest_command_that_is_no_trace_view_with_its_task_s_files) {
  temp_dir dir;
  const auto traces = dir / "traces";
  const auto line = [](std::string_view uuid, double ts, std::string_view type) {
    return test::msg("1", ts, type, "started", "", uuid);
  };
  dir.write("traces/20260101T000001-10-ferry-pack.jsonl", line("A", 100, "ferry:pack"));
  const auto run = dir.write("traces/20260101T000002-11-ferry-run.jsonl", line("B", 200, "ferry:run"));
  dir.write("traces/20260101T000002-11-ferry-run.node-n1-1.jsonl", line("B", 201, "ferry:node:materialise"));
  const auto hold = dir.write("traces/20260101T000003-12-ferry-cluster-hold.jsonl", line("B", 202.5, "ferry:cluster:hold"));
  dir.write("traces/20260101T000004-13-ferry-trace-stats.jsonl", line("C", 300, "ferry:trace:stats"));
  dir.write("traces/20260101T000005-14-ferry-trace-tree.jsonl", line("D", 400, "ferry:trace:tree"));
  dir.write("traces/empty.jsonl", "");
  diagnostics diag;
  // The holder started last of the commands: its file is the one, and the run's is of the same task.
  auto last = find_last_trace(traces, "ferry:trace:", diag);
  ASSERT_TRUE(last) << diag.message;
  EXPECT_EQ(last->file, hold);
  EXPECT_EQ(last->action_type, "ferry:cluster:hold");
  ASSERT_EQ(last->files.size(), 2u);
  EXPECT_EQ(last->files[1], run);
  // read_traces brings the run's node file along.
  const auto set = read_traces(last->files, diag);
  ASSERT_TRUE(set) << diag.message;
  EXPECT_EQ(set->files.size(), 3u);

  temp_dir views;
  views.write("traces/a.jsonl", line("C", 300, "ferry:trace:stats"));
  auto none = find_last_trace(views / "traces", "ferry:trace:", diag);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error(), make_error_code(errc::no_trace));
  EXPECT_NE(diag.message.find("no command's trace in " + (views / "traces").string()), std::string::npos) << diag.message;
  EXPECT_FALSE(find_last_trace(dir / "missing", "ferry:trace:", diag));
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
