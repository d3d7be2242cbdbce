// The map's inputs and its scheduling, without nodes: which task a node takes, and what an attempt's end
// does to it.
#include "agent/error.hpp"
#include "agent/map/map_inputs.hpp"
#include "agent/map/map_schedule.hpp"

#include <gtest/gtest.h>

namespace ferry::agent {
namespace {

using verdict = map_schedule::verdict;

TEST(map_inputs, range_includes_both_ends) {
  diagnostics diag;
  auto r = range_inputs("3..6", 100, diag);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(*r, (std::vector<std::string>{"3", "4", "5", "6"}));
  auto neg = range_inputs("-1..1", 100, diag);
  ASSERT_TRUE(neg);
  EXPECT_EQ(neg->size(), 3u);
}

TEST(map_inputs, bad_ranges_are_named) {
  for (const char* spec : {"1-20", "a..b", "5..1", "1..", "..3", "1..1000"}) {
    diagnostics diag;
    auto r = range_inputs(spec, 100, diag);
    ASSERT_FALSE(r) << spec;
    EXPECT_EQ(r.error(), errc::bad_task_input);
    EXPECT_NE(diag.message.find(spec), std::string::npos) << diag.message;
  }
}

TEST(map_inputs, lines_skip_blank_and_drop_cr) {
  EXPECT_EQ(line_inputs("a\r\n\nb c\n  \nlast"), (std::vector<std::string>{"a", "b c", "  ", "last"}));
  EXPECT_TRUE(line_inputs("").empty());
}

TEST(map_inputs, a_missing_file_is_named) {
  diagnostics diag;
  auto r = file_inputs("/nonexistent/inputs.txt", diag);
  ASSERT_FALSE(r);
  EXPECT_NE(diag.message.find("/nonexistent/inputs.txt"), std::string::npos);
}

TEST(map_inputs, placeholder_is_replaced_or_input_appended) {
  EXPECT_EQ(task_argv({"python3", "job.py", "--n={}", "{}{}"}, "7"),
            (std::vector<std::string>{"python3", "job.py", "--n=7", "77"}));
  EXPECT_EQ(task_argv({"echo", "x"}, "a b"), (std::vector<std::string>{"echo", "x", "a b"}));
}

TEST(map_schedule, tasks_go_in_order_and_finish) {
  map_schedule s({"a", "b"}, 0);
  auto first = s.take("n1", 1);
  auto second = s.take("n1", 1);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*first, 0u);
  EXPECT_EQ(*second, 1u);
  EXPECT_FALSE(s.take("n1", 1));
  EXPECT_EQ(s.exited(0, 0), verdict::done);
  EXPECT_FALSE(s.finished());
  EXPECT_EQ(s.exited(1, 3), verdict::failed);
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(s.done(), 1u);
  EXPECT_EQ(s.failed(), 1u);
  EXPECT_EQ(s.task(1).exit_code, 3);
}

TEST(map_schedule, a_failed_attempt_goes_to_another_node) {
  map_schedule s({"a", "b"}, 1);
  auto i = s.take("n1", 2);
  ASSERT_TRUE(i);
  EXPECT_EQ(s.exited(*i, 1), verdict::retry);
  // n1 takes the next task instead of retrying its own failure...
  auto j = s.take("n1", 2);
  ASSERT_TRUE(j);
  EXPECT_EQ(*j, 1u);
  // ...and nothing else is there for n1, while n2 gets the retry.
  EXPECT_FALSE(s.take("n1", 2));
  auto k = s.take("n2", 2);
  ASSERT_TRUE(k);
  EXPECT_EQ(*k, 0u);
  EXPECT_EQ(s.task(0).attempts, 2);
  EXPECT_EQ(s.retried(), 1u);
  EXPECT_EQ(s.exited(0, 0), verdict::done);
}

TEST(map_schedule, the_only_node_left_retries_its_own_failures) {
  map_schedule s({"a"}, 2);
  ASSERT_TRUE(s.take("n1", 1));
  EXPECT_EQ(s.node_lost(0, "gone"), verdict::retry);
  auto again = s.take("n1", 1);
  ASSERT_TRUE(again);
  EXPECT_EQ(s.exited(*again, 1), verdict::retry);
  ASSERT_TRUE(s.take("n1", 1));
  EXPECT_EQ(s.exited(0, 1), verdict::failed);
  EXPECT_EQ(s.task(0).attempts, 3);
  EXPECT_TRUE(s.finished());
}

TEST(map_schedule, broken_and_stranded_tasks_fail_without_retry) {
  map_schedule s({"a", "b", "c"}, 5);
  ASSERT_TRUE(s.take("n1", 1));
  s.broke(0, "output too large");
  EXPECT_EQ(s.task(0).now, map_task::state::failed);
  s.fail_waiting("no node");
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(s.failed(), 3u);
  EXPECT_EQ(s.task(2).error, "no node");
}

}  // namespace
}  // namespace ferry::agent
