// `ferry trace stats` on hand-built traces whose answers are worked out by hand in the comments.
#include "tracing/action_types.hpp"
#include "tracing/percentiles.hpp"
#include "tracing/stats_view.hpp"
#include "tracing/trace_stats.hpp"

#include "support/sample_traces.hpp"
#include "support/synthetic_runs.hpp"
#include "support/temp_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <numeric>

namespace ferry::tracing {
namespace {

using test::map_trace;
using test::msg;
using test::temp_dir;

trace_set read(temp_dir& dir, std::string_view name, const std::string& text) {
  diagnostics diag;
  auto set = read_traces({dir.write(name, text)}, diag);
  EXPECT_TRUE(set) << diag.message;
  return std::move(*set);
}

trace_stats stats_of(const trace_set& set) { return compute_stats(set, build_task_trees(set)); }

const action_type_stats& type_stats(const trace_stats& s, std::string_view type) {
  for (const auto& t : s.action_types)
    if (t.action_type == type) return t;
  throw std::runtime_error("no stats for " + std::string(type));
}

TEST(percentiles, nearest_rank_picks_one_of_the_values) {
  std::vector<double> ten(10);
  std::iota(ten.begin(), ten.end(), 1.0);
  const auto p = summarise(ten);
  EXPECT_EQ(p.count, 10u);
  EXPECT_EQ(p.p50, 5);
  EXPECT_EQ(p.p90, 9);
  EXPECT_EQ(p.p99, 10);
  EXPECT_EQ(p.max, 10);

  std::vector<double> hundred(100);
  std::iota(hundred.begin(), hundred.end(), 1.0);
  std::reverse(hundred.begin(), hundred.end());  // summarise sorts
  const auto q = summarise(hundred);
  EXPECT_EQ(q.p50, 50);
  EXPECT_EQ(q.p90, 90);
  EXPECT_EQ(q.p99, 99);

  const auto three = summarise({0.5, 0.25, 4});  // ranks ceil(1.5) = 2, ceil(2.7) = 3
  EXPECT_EQ(three.p50, 0.5);
  EXPECT_EQ(three.p90, 4);
  const auto one = summarise({7});
  EXPECT_EQ(one.p50, 7);
  EXPECT_EQ(one.p99, 7);
  const auto none = summarise({});
  EXPECT_EQ(none.count, 0u);
  EXPECT_EQ(none.max, 0);
}

TEST(utilisation, busy_is_the_union_of_tasks_inside_the_provisioned_time) {
  const auto merged = merge_intervals({{5, 7}, {1, 2}, {2, 3}, {6, 9}, {4, 4}});
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].begin, 1);
  EXPECT_EQ(merged[0].end, 3);
  EXPECT_EQ(merged[1].begin, 5);
  EXPECT_EQ(merged[1].end, 9);

  // Released at 8, before the job's end at 10; a task that (by a skewed clock) runs past the release is clipped.
  const auto u = measure_node("n", {1, 8.0, {{2, 4}, {3, 5}, {7, 9}}}, 10);
  EXPECT_EQ(u.provisioned.begin, 1);
  EXPECT_EQ(u.provisioned.end, 8);
  EXPECT_EQ(u.busy_seconds(), 4);  // 2..5 and 7..8
  // Without a release the node is provisioned to the job's end.
  EXPECT_EQ(measure_node("n", {1, std::nullopt, {}}, 10).provisioned_seconds(), 9);

  const auto a = measure_node("a", {0, std::nullopt, {{1, 3}}}, 4);
  const auto b = measure_node("b", {2, std::nullopt, {{2, 4}}}, 4);
  const auto counts = nodes_over_time({&a, &b});
  const std::vector<std::tuple<double, int, int>> expected = {{0, 1, 0}, {1, 1, 1}, {2, 2, 2}, {3, 2, 1}, {4, 0, 0}};
  ASSERT_EQ(counts.size(), expected.size());
  for (std::size_t i = 0; i < counts.size(); ++i)
    EXPECT_EQ(std::make_tuple(counts[i].time, counts[i].provisioned, counts[i].busy), expected[i]) << i;
}

TEST(trace_stats, a_hand_built_map_gives_exact_figures) {
  temp_dir dir;
  const auto s = stats_of(read(dir, "map.jsonl", map_trace()));
  EXPECT_EQ(s.eliot_tasks, 1u);
  EXPECT_TRUE(s.incomplete_eliot_tasks.empty());
  EXPECT_TRUE(s.problems.empty());

  // Task durations 5, 6, 8, 4 sorted 4 5 6 8: p50 rank 2 = 5, p90 rank 4 = 8.
  const auto& tasks = type_stats(s, action_types::agent::task);
  EXPECT_EQ(tasks.count, 4u);
  EXPECT_EQ(tasks.failures, 1u);
  EXPECT_EQ(tasks.incomplete, 0u);
  EXPECT_EQ(tasks.duration.p50, 5);
  EXPECT_EQ(tasks.duration.p90, 8);
  EXPECT_EQ(tasks.duration.p99, 8);
  EXPECT_EQ(tasks.duration.max, 8);
  EXPECT_EQ(type_stats(s, action_types::provision::node).duration.max, 5);
  EXPECT_EQ(type_stats(s, action_types::map::job).duration.p50, 20);

  ASSERT_EQ(s.jobs.size(), 1u);
  const auto& j = s.jobs[0];
  EXPECT_EQ(j.action_type, action_types::map::job);
  EXPECT_EQ(j.status, "succeeded");
  EXPECT_TRUE(j.complete);
  EXPECT_EQ(j.time.length(), 20);
  EXPECT_EQ(j.tasks, 4u);
  EXPECT_EQ(j.failed_tasks, 1u);

  // Pending 5 6 10 12: p50 rank 2 = 6, p90 rank 4 = 12; within 2 s none, 5 s one of four, 60 s all.
  EXPECT_EQ(j.pending_summary.seconds.count, 4u);
  EXPECT_EQ(j.pending_summary.seconds.p50, 6);
  EXPECT_EQ(j.pending_summary.seconds.p90, 12);
  EXPECT_EQ(j.pending_summary.seconds.p99, 12);
  EXPECT_EQ(j.pending_summary.within_2s, 0);
  EXPECT_EQ(j.pending_summary.within_5s, 0.25);
  EXPECT_EQ(j.pending_summary.within_60s, 1);

  // n1: provisioned 1001 .. 1020 (19 s), busy 1005 .. 1018 (13 s, t1 and t3 touch);
  // n2: provisioned 1001 .. 1017 (terminated; 16 s), busy 1006 .. 1016 (10 s).
  ASSERT_EQ(j.nodes.size(), 2u);
  EXPECT_EQ(j.nodes[0].node, "n1");
  EXPECT_EQ(j.nodes[0].provisioned_seconds(), 19);
  EXPECT_EQ(j.nodes[0].busy_seconds(), 13);
  EXPECT_EQ(j.nodes[1].provisioned_seconds(), 16);
  EXPECT_EQ(j.nodes[1].busy_seconds(), 10);
  EXPECT_EQ(j.usage.busy_node_seconds, 23);
  EXPECT_EQ(j.usage.provisioned_node_seconds, 35);
  EXPECT_EQ(j.usage.ratio(), 23.0 / 35.0);
  EXPECT_EQ(j.usage.overhead(), 1 - 23.0 / 35.0);
  EXPECT_EQ(s.usage.busy_node_seconds, 23);

  // Back from 1020: t3 ends last (map's own time 1018 .. 1020 before it), then from t3's start at 1010 the
  // latest child ending by then is t1, then n1's provisioning (its wait and create), then the map's own
  // second at the start. t2, t4, n2 and the hash overlap links: off the path.
  const std::vector<std::tuple<std::string_view, std::string, std::size_t, double, double, double>> expected = {
      {action_types::map::job, "", 0, 1000, 1001, 0.05},
      {action_types::provision::create, "n1", 2, 1001, 1002, 0.05},
      {action_types::readiness::wait_ssh, "n1", 2, 1002, 1005, 0.15},
      {action_types::agent::task, "n1", 1, 1005, 1010, 0.25},
      {action_types::agent::task, "n1", 1, 1010, 1018, 0.4},
      {action_types::map::job, "", 0, 1018, 1020, 0.1}};
  ASSERT_EQ(j.path.links.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& l = j.path.links[i];
    EXPECT_EQ(std::make_tuple(l.action_type, l.node, l.depth, l.begin, l.end, l.share), expected[i]) << i;
  }
  EXPECT_EQ(j.path.total(), j.time.length());
  EXPECT_EQ(j.path.links[3].level, "/5");
}

TEST(trace_stats, an_incomplete_task_is_counted_and_lasts_until_its_parent_ends) {
  // A run whose first node was killed mid-task (no end message) and whose retry on n2 succeeded:
  //   provision n1 2000 .. 2002; task on n1 from 2002, submitted 2001.5, never ends (so: until 2010);
  //   provision n2 2004 .. 2005; task on n2 2005 .. 2009, submitted 2004; the run ends at 2010.
  // On the critical path the lost task ends where the trace last saw it (2002), so the retry is the chain.
  temp_dir dir;
  const auto text = msg("1", 2000, action_types::run::job, "started") +
                    msg("2,1", 2000, action_types::provision::node, "started", R"(,"node":"n1")") +
                    msg("2,2", 2002, action_types::provision::node, "succeeded") +
                    msg("3,1", 2002, action_types::agent::task, "started", R"(,"node":"n1","submitted_at":2001.5)") +
                    msg("4,1", 2004, action_types::provision::node, "started", R"(,"node":"n2")") +
                    msg("4,2", 2005, action_types::provision::node, "succeeded") +
                    msg("5,1", 2005, action_types::agent::task, "started", R"(,"node":"n2","submitted_at":2004)") +
                    msg("5,2", 2009, action_types::agent::task, "succeeded") +
                    msg("6", 2010, action_types::run::job, "succeeded");
  const auto s = stats_of(read(dir, "run.jsonl", text));
  ASSERT_EQ(s.incomplete_eliot_tasks.size(), 1u);
  const auto& tasks = type_stats(s, action_types::agent::task);
  EXPECT_EQ(tasks.count, 2u);
  EXPECT_EQ(tasks.incomplete, 1u);
  EXPECT_EQ(tasks.duration.count, 1u);  // only the finished task has a duration
  ASSERT_EQ(s.jobs.size(), 1u);
  const auto& j = s.jobs[0];
  EXPECT_FALSE(j.complete);
  EXPECT_EQ(j.status, "succeeded");
  EXPECT_EQ(j.incomplete_tasks, 1u);
  EXPECT_EQ(j.pending_summary.seconds.p50, 0.5);
  EXPECT_EQ(j.pending_summary.seconds.max, 1);
  EXPECT_EQ(j.pending_summary.within_2s, 1);
  // n1: 2000 .. 2010 provisioned, busy 2002 .. 2010; n2: 2004 .. 2010, busy 2005 .. 2009. 12 of 16.
  EXPECT_EQ(j.usage.busy_node_seconds, 12);
  EXPECT_EQ(j.usage.provisioned_node_seconds, 16);
  EXPECT_EQ(j.usage.ratio(), 0.75);
  const std::vector<std::tuple<std::string_view, std::string, double, double, double>> expected = {
      {action_types::provision::node, "n1", 2000, 2002, 0.2},
      {action_types::run::job, "", 2002, 2004, 0.2},
      {action_types::provision::node, "n2", 2004, 2005, 0.1},
      {action_types::agent::task, "n2", 2005, 2009, 0.4},
      {action_types::run::job, "", 2009, 2010, 0.1}};
  ASSERT_EQ(j.path.links.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& l = j.path.links[i];
    EXPECT_EQ(std::make_tuple(l.action_type, l.node, l.begin, l.end, l.share), expected[i]) << i;
  }

  const auto report = render_stats(s);
  EXPECT_NE(report.find("1 eliot tasks (1 incomplete)"), std::string::npos) << report;
  EXPECT_NE(report.find("succeeded (incomplete), 2 tasks (0 failed, 1 incomplete)"), std::string::npos) << report;
  EXPECT_NE(report.find("incomplete task: M"), std::string::npos) << report;
}

TEST(trace_stats, a_crashed_run_ends_with_its_last_message) {
  // The process died at 3005: nothing ended. The run lasts from 3000 to its task's last message.
  temp_dir dir;
  const auto text = msg("1", 3000, action_types::run::job, "started") +
                    msg("2,1", 3001, action_types::agent::task, "started", R"(,"node":"n1","submitted_at":3000)") +
                    msg("2,2,1", 3002, action_types::agent::materialise, "started", R"(,"node":"n1")") +
                    fmt::format(R"({{"task_uuid":"M","task_level":[2,3],"timestamp":3005,"message_type":"{}"}})",
                                action_types::ssh::exec_bytes) +
                    "\n";
  const auto s = stats_of(read(dir, "crash.jsonl", text));
  ASSERT_EQ(s.jobs.size(), 1u);
  const auto& j = s.jobs[0];
  EXPECT_EQ(j.status, "started");
  EXPECT_EQ(j.time.begin, 3000);
  EXPECT_EQ(j.time.end, 3005);
  EXPECT_EQ(j.incomplete_tasks, 1u);
  EXPECT_EQ(j.usage.provisioned_node_seconds, 4);  // first named at 3001
  EXPECT_EQ(j.usage.busy_node_seconds, 4);
  EXPECT_EQ(j.path.total(), 5);
  EXPECT_EQ(type_stats(s, action_types::run::job).incomplete, 1u);
  EXPECT_EQ(type_stats(s, action_types::agent::materialise).incomplete, 1u);
}

TEST(trace_stats, malformed_lines_are_named_and_the_rest_is_used) {
  temp_dir dir;
  auto text = map_trace();
  // Break line 3 (not JSON) and put a line without task_level after line 5.
  std::vector<std::string> lines;
  for (std::size_t at = 0, next; (next = text.find('\n', at)) != std::string::npos; at = next + 1)
    lines.push_back(text.substr(at, next - at));
  lines[2] = R"({"task_uuid":"M","task_level":[2,2)";
  lines.insert(lines.begin() + 5, R"({"task_uuid":"M","timestamp":1003,"message_type":"x"})");
  std::string broken;
  for (const auto& l : lines) broken += l + "\n";
  const auto file = dir.write("broken.jsonl", broken);
  diagnostics diag;
  const auto set = read_traces({file}, diag);
  ASSERT_TRUE(set);
  ASSERT_EQ(set->problems.size(), 2u);
  EXPECT_EQ(set->problems[0].rfind(file.string() + ":3: not JSON", 0), 0u) << set->problems[0];
  EXPECT_EQ(set->problems[1], file.string() + ":6: no task_level");
  const auto s = stats_of(*set);
  EXPECT_EQ(s.problems.size(), 2u);
  // The hash lost its end message and so is incomplete; everything else is as before.
  EXPECT_EQ(type_stats(s, action_types::packaging::hash).incomplete, 1u);
  ASSERT_EQ(s.jobs.size(), 1u);
  EXPECT_EQ(s.jobs[0].tasks, 4u);
  EXPECT_EQ(s.jobs[0].usage.busy_node_seconds, 23);
  EXPECT_EQ(s.jobs[0].path.links.size(), 6u);
}

TEST(trace_stats, overlapping_children_and_a_continued_task) {
  // A Python orchestrator's task (root in its own file, not given here) continued by ferry: the map is at
  // level [2] of task "P" and its start and end are in ferry's file. Children: a [0, 5], b [3, 8], c [8, 8].
  // Back from 10: c is zero-length at 8 (left out, the map's own time on both sides is one link), b ends
  // last (8), then from b's start at 3 nothing ends by 3 (a ends at 5: it overlaps b), so map's own time.
  temp_dir dir;
  const auto text = msg("2,1", 0, action_types::map::job, "started", "", "P") +
                    msg("2,2,1", 0, "a", "started", "", "P") + msg("2,2,2", 5, "a", "succeeded", "", "P") +
                    msg("2,3,1", 3, "b", "started", "", "P") + msg("2,3,2", 8, "b", "succeeded", "", "P") +
                    msg("2,4,1", 8, "c", "started", "", "P") + msg("2,4,2", 8, "c", "succeeded", "", "P") +
                    msg("2,5", 10, action_types::map::job, "succeeded", "", "P");
  const auto s = stats_of(read(dir, "ferry.jsonl", text));
  ASSERT_EQ(s.jobs.size(), 1u);
  const auto& path = s.jobs[0].path.links;
  ASSERT_EQ(path.size(), 3u);
  EXPECT_EQ(std::make_tuple(path[0].action_type, path[0].begin, path[0].end),
            std::make_tuple(action_types::map::job, 0.0, 3.0));
  EXPECT_EQ(std::make_tuple(path[1].action_type, path[1].begin, path[1].end), std::make_tuple("b", 3.0, 8.0));
  EXPECT_EQ(std::make_tuple(path[2].action_type, path[2].begin, path[2].end),
            std::make_tuple(action_types::map::job, 8.0, 10.0));
  EXPECT_EQ(s.jobs[0].level, "/2");
  EXPECT_EQ(path[0].share + path[1].share + path[2].share, 1);
}

TEST(trace_stats, a_cancellation_is_counted_apart_from_a_failure) {
  temp_dir dir;
  const auto s = stats_of(read(dir, "interrupted.jsonl", test::interrupted_map_trace()));
  const auto& tasks = type_stats(s, action_types::agent::task);
  EXPECT_EQ(tasks.count, 3u);
  EXPECT_EQ(tasks.failures, 1u);  // b's exit status 1
  EXPECT_EQ(tasks.cancelled, 1u);  // c
  const auto& attempts = type_stats(s, action_types::node::attempt);
  EXPECT_EQ(attempts.count, 3u);
  EXPECT_EQ(attempts.failures, 0u);  // the two lost races are no failures
  EXPECT_EQ(attempts.cancelled, 2u);
  ASSERT_EQ(s.jobs.size(), 1u);
  EXPECT_EQ(s.jobs[0].status, "cancelled");
  EXPECT_EQ(s.jobs[0].failed_tasks, 1u);
  EXPECT_EQ(s.jobs[0].cancelled_tasks, 1u);
  ASSERT_EQ(s.job_types.size(), 1u);
  EXPECT_EQ(s.job_types[0].failed, 0u);
  EXPECT_EQ(s.job_types[0].cancelled, 1u);

  // The text has a column of its own, and the JSON a count beside the failures.
  const auto text = render_stats(s);
  EXPECT_NE(text.find("failed cancelled incomplete"), std::string::npos) << text;
  EXPECT_NE(text.find("3 tasks (1 failed, 1 cancelled, 0 incomplete)"), std::string::npos) << text;
  const auto json = stats_to_json(s);
  for (const auto& t : json.at("action_types").as_array())
    if (t.at("action_type").as_string() == action_types::node::attempt) {
      EXPECT_EQ(t.at("failures"), 0);
      EXPECT_EQ(t.at("cancelled"), 2);
    }
  EXPECT_EQ(json.at("jobs").at(0).at("cancelled_tasks"), 1);
}

// A run whose pack hashed 101 files in a row, each under half a millisecond (one failed), then ran its
// task, beside a peer server that ran to the run's end: 4000 .. 4001.
//   hashes 0..49    4000.2000 .. 4000.2050, 100 µs each, back to back
//   hash 50         4000.2050 .. 4000.2051, failed
//   hashes 51..100  4000.2051 .. 4000.2101
//   task            4000.2101 .. 4001
//   ferry:serve     4000.1    .. 4001 (ends with the run, and began before the task: without the rule
//                   that no background server is a link, it would be the path's last link)
TEST(critical_path, negligible_links_and_background_servers_fold) {
  temp_dir dir;
  const auto at = [](int micros) { return 4000 + micros / 1e6; };
  std::string text = msg("1", 4000, action_types::run::job, "started");
  int level = 2;
  for (int i = 0; i <= 100; ++i) {
    const int b = i <= 50 ? 200000 + 100 * i : 205100 + 100 * (i - 51);
    const auto lv = std::to_string(level++);
    text += msg(lv + ",1", at(b), action_types::packaging::hash, "started");
    text += msg(lv + ",2", at(b + 100), action_types::packaging::hash, i == 50 ? "failed" : "succeeded",
                i == 50 ? R"(,"exception":"packaging:3","reason":"unreadable")" : "");
  }
  const auto serve = std::to_string(level++), task = std::to_string(level++);
  text += msg(serve + ",1", at(100000), action_types::agent::serve, "started", R"(,"node":"n1")");
  text += msg(task + ",1", at(210100), action_types::agent::task, "started", R"(,"node":"n1")");
  text += msg(task + ",2", 4001, action_types::agent::task, "succeeded");
  text += msg(serve + ",2", 4001, action_types::agent::serve, "succeeded");
  text += msg(std::to_string(level), 4001, action_types::run::job, "succeeded");
  const auto s = stats_of(read(dir, "run.jsonl", text));
  ASSERT_EQ(s.jobs.size(), 1u);
  const auto& path = s.jobs[0].path;
  ASSERT_EQ(path.links.size(), 5u) << render_stats(s);
  EXPECT_EQ(std::make_tuple(path.links[0].action_type, path.links[0].folded), std::make_tuple(action_types::run::job, 0ul));
  EXPECT_EQ(std::make_tuple(path.links[1].action_type, path.links[1].folded, path.links[1].begin, path.links[1].end),
            std::make_tuple(action_types::packaging::hash, 50ul, at(200000), at(205000)));
  EXPECT_EQ(std::make_tuple(path.links[2].status, path.links[2].folded), std::make_tuple("failed", 0ul));
  EXPECT_EQ(std::make_tuple(path.links[3].folded, path.links[3].begin, path.links[3].end),
            std::make_tuple(50ul, at(205100), at(210100)));
  EXPECT_EQ(path.links[4].action_type, action_types::agent::task);
  EXPECT_NEAR(path.total(), 1.0, 1e-9);
  const auto report = render_stats(s);
  EXPECT_NE(report.find("… 50 steps of 0.000 s (ferry:packaging:hash)"), std::string::npos) << report;
}

TEST(trace_stats, a_thousand_runs_add_up) {
  temp_dir dir;
  constexpr std::size_t runs = 1000;
  for (std::size_t i = 0; i < runs; ++i) dir.write(fmt::format("runs/run-{:04}.jsonl", i), test::synthetic_run(i));
  diagnostics diag;
  const auto set = read_traces({dir / "runs"}, diag);
  ASSERT_TRUE(set) << diag.message;
  const auto s = stats_of(*set);
  EXPECT_EQ(s.files, runs);
  EXPECT_EQ(s.eliot_tasks, runs);
  EXPECT_TRUE(s.incomplete_eliot_tasks.empty());
  ASSERT_EQ(s.jobs.size(), runs);
  // Task durations 1..5, 200 each: rank 500 is a 3, rank 900 a 5. Pending 0..3, 250 each: rank 500 is a 1.
  const auto& tasks = type_stats(s, action_types::agent::task);
  EXPECT_EQ(tasks.count, runs);
  EXPECT_EQ(tasks.failures, 10u);
  EXPECT_EQ(tasks.duration.p50, 3);
  EXPECT_EQ(tasks.duration.p90, 5);
  EXPECT_EQ(s.pending_summary.seconds.count, runs);
  EXPECT_EQ(s.pending_summary.seconds.p50, 1);
  EXPECT_EQ(s.pending_summary.seconds.p90, 3);
  EXPECT_EQ(s.pending_summary.within_2s, 0.75);
  EXPECT_EQ(s.pending_summary.within_5s, 1);
  EXPECT_EQ(s.usage.busy_node_seconds, 3000);  // 200 * (1 + 2 + 3 + 4 + 5)
  EXPECT_EQ(s.usage.provisioned_node_seconds, 9500);
  ASSERT_EQ(s.job_types.size(), 1u);
  EXPECT_EQ(s.job_types[0].jobs, runs);
  for (std::size_t i = 0; i < runs; ++i) {
    const auto& j = s.jobs[i];
    ASSERT_EQ(j.time.begin, test::synthetic_run_start(i));
    ASSERT_EQ(j.path.total(), 10) << i;
    ASSERT_EQ(j.path.links.size(), 6u) << i;
    ASSERT_EQ(j.path.links[2].action_type, action_types::agent::task);
    ASSERT_EQ(j.path.links[2].duration(), test::synthetic_task_seconds(i));
    ASSERT_LE(j.usage.busy_node_seconds, j.usage.provisioned_node_seconds);
  }
}

}  // namespace
}  // namespace ferry::tracing

namespace ferry::tracing {
namespace {

TEST(trace_stats, the_nodes_fetching_that_overlapped_the_pack_is_measured) {
  // A run packs 4000 .. 4010; layer L's shard 1 is stored at 4003 and fetched by n1 4004 .. 4006 and n2
  // 4005 .. 4007; shard 2 is stored at 4009 and fetched by n1 4009.5 .. 4012. A shard found in storage
  // (layer K) has no upload. Fetching covers 4004 .. 4007 and 4009.5 .. 4012: 5.5 s, of which 3.5 s before
  // the pack's end; 3 of 4 fetches started before it. Waits from upload to first fetch: 1 s and 0.5 s.
  temp_dir dir;
  const std::string shard1 = R"(,"layer_id":"aa","shard":1)", shard2 = R"(,"layer_id":"aa","shard":2)";
  const auto text =
      msg("1", 4000, action_types::run::job, "started") +
      msg("2,1", 4000, action_types::packaging::pack, "started") +
      msg("2,2,1", 4001, action_types::packaging::upload, "started", R"(,"layer":"L")" + shard1) +
      msg("2,2,2", 4003, action_types::packaging::upload, "succeeded") +
      msg("2,3,1", 4003, action_types::packaging::upload, "started", R"(,"layer":"L")" + shard2) +
      msg("2,3,2", 4009, action_types::packaging::upload, "succeeded") +
      msg("2,4", 4010, action_types::packaging::pack, "succeeded") +
      msg("3,1", 4004, action_types::node::shard, "started", R"(,"node":"n1","layer":"aa","shard":1)") +
      msg("3,2", 4006, action_types::node::shard, "succeeded") +
      msg("4,1", 4005, action_types::node::shard, "started", R"(,"node":"n2","layer":"aa","shard":1)") +
      msg("4,2", 4007, action_types::node::shard, "succeeded") +
      msg("5,1", 4009.5, action_types::node::shard, "started", R"(,"node":"n1","layer":"aa","shard":2)") +
      msg("5,2", 4012, action_types::node::shard, "succeeded") +
      msg("6,1", 4010.5, action_types::node::shard, "started", R"(,"node":"n1","layer":"kk","shard":1)") +
      msg("6,2", 4011, action_types::node::shard, "succeeded") +
      msg("7", 4013, action_types::run::job, "succeeded");
  const auto s = stats_of(read(dir, "overlap.jsonl", text));
  ASSERT_EQ(s.jobs.size(), 1u);
  const auto& o = s.jobs[0].overlap;
  EXPECT_TRUE(o.measured());
  EXPECT_EQ(o.pack.begin, 4000);
  EXPECT_EQ(o.pack.end, 4010);
  EXPECT_EQ(o.fetches, 4u);
  EXPECT_EQ(o.fetches_early, 3u);
  EXPECT_DOUBLE_EQ(o.fetching, 5.5);
  EXPECT_DOUBLE_EQ(o.fetching_in_pack, 3.5);
  EXPECT_EQ(o.upload_to_fetch.count, 2u);
  EXPECT_DOUBLE_EQ(o.upload_to_fetch.p50, 0.5);
  EXPECT_DOUBLE_EQ(o.upload_to_fetch.max, 1);
  const auto report = render_stats(s);
  EXPECT_NE(report.find("node fetch started before the pack ended: 3.500 s of 5.500 s (3 of 4 shard fetches)"),
            std::string::npos)
      << report;

  // A job without a pack (a warm run with its manifest given) says nothing of it.
  const auto warm = msg("1", 5000, action_types::run::job, "started") +
                    msg("2,1", 5001, action_types::node::shard, "started", R"(,"layer":"aa","shard":1)") +
                    msg("2,2", 5002, action_types::node::shard, "succeeded") +
                    msg("3", 5003, action_types::run::job, "succeeded");
  const auto w = stats_of(read(dir, "warm.jsonl", warm));
  EXPECT_FALSE(w.jobs.at(0).overlap.measured());
  EXPECT_EQ(render_stats(w).find("node fetch started"), std::string::npos);
}

}  // namespace
}  // namespace ferry::tracing
