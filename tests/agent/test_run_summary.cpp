// What runs and maps say at their end and on the way, without nodes: the line a failed node is told by,
// how far an interrupted map got, and the map's progress line.
#include "agent/run/ignored_hint.hpp"
#include "agent/map/map_progress.hpp"
#include "agent/run/run_summary.hpp"

#include <gtest/gtest.h>

namespace ferry::agent {
namespace {

TEST(run_summary, a_failed_node_is_told_by_its_exit_code_and_last_stderr_line) {
  // The line comes from the stderr tail the run keeps anyway (agent/run/ignored_hint.hpp).
  const auto last = last_lines("Traceback (most recent call last):\nValueError: bad input\r\n\n", 1);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last.front(), "ValueError: bad input");
  EXPECT_EQ(node_failure_line("node-2", 3, "ValueError: bad input"), "node-2 failed: exit code 3: ValueError: bad input");
  EXPECT_EQ(node_failure_line("node-1", 137, ""), "node-1 failed: exit code 137");
}

TEST(run_summary, an_interrupted_map_says_what_finished_and_what_did_not) {
  map_schedule s({"a", "b", "c", "d", "e"}, 0);
  const auto first = s.take("n1", 1);
  const auto second = s.take("n1", 1);
  const auto third = s.take("n1", 1);
  ASSERT_TRUE(first && second && third);
  s.exited(*first, 0);
  s.exited(*second, 1);
  const auto t = tally_of(s);
  EXPECT_EQ(t.total, 5u);
  EXPECT_EQ(t.done, 1u);
  EXPECT_EQ(t.failed, 1u);
  EXPECT_EQ(t.cut_short, 1u);
  EXPECT_EQ(t.not_run, 2u);
  EXPECT_EQ(interrupted_map_line(t), "5 tasks: 1 done, 1 failed, 1 cut short, 2 not run");
  map_schedule one({"a"}, 0);
  EXPECT_EQ(interrupted_map_line(tally_of(one)), "1 task: 0 done, 0 failed, 0 cut short, 1 not run");
}

TEST(map_progress, says_counts_rate_and_time_left) {
  EXPECT_EQ(map_progress_line({100, 0, 0, 0}, std::nullopt), "map  0 / 100 done, 0 failed, 0 retried  starting");
  EXPECT_EQ(map_progress_line({100, 0, 0, 0}, 2.0), "map  0 / 100 done, 0 failed, 0 retried");
  EXPECT_EQ(map_progress_line({100, 38, 2, 3}, 4.0), "map  38 / 100 done, 2 failed, 3 retried  10.0 tasks/s  ETA 6 s");
  EXPECT_EQ(map_progress_line({10, 10, 0, 0}, 5.0), "map  10 / 10 done, 0 failed, 0 retried  2.0 tasks/s");
}

TEST(map_progress, time_left_reads_as_seconds_minutes_or_hours) {
  EXPECT_EQ(eta_text(0.2), "1 s");
  EXPECT_EQ(eta_text(59), "59 s");
  EXPECT_EQ(eta_text(125), "2 m 05 s");
  EXPECT_EQ(eta_text(3720), "1 h 02 m");
}

}  // namespace
}  // namespace ferry::agent
