// Which worker runs which task of the Python API (agent/api/api_schedule.hpp), without workers: tasks go
// in order, wait for their blobs, are answered once, and a lost worker's tasks go again or fail.
#include "agent/api/api_schedule.hpp"

#include <gtest/gtest.h>

namespace ferry::agent::api {
namespace {

api_task task(std::uint64_t id, std::vector<std::uint64_t> blobs = {}) {
  return api_task{id, 1, std::move(blobs), "payload " + std::to_string(id), 0, 0};
}

std::uint64_t take_id(api_schedule& s, std::size_t w) {
  const auto* t = s.take(w);
  return t ? t->id : 0;
}

TEST(api_schedule, tasks_go_in_the_order_they_came) {
  api_schedule s(0);
  for (std::uint64_t i = 1; i <= 3; ++i) s.add(task(i));
  EXPECT_EQ(take_id(s, 0), 1u);
  EXPECT_EQ(take_id(s, 1), 2u);
  EXPECT_EQ(take_id(s, 0), 3u);
  EXPECT_EQ(take_id(s, 0), 0u);
  EXPECT_EQ(s.running(0), 1u);  // the oldest it holds
  EXPECT_EQ(s.held_by(0), 2u);
}

TEST(api_schedule, a_task_waits_for_its_blobs) {
  api_schedule s(0);
  s.add(task(1, {10, 11}));
  s.add(task(2));
  EXPECT_EQ(take_id(s, 0), 2u);
  EXPECT_EQ(take_id(s, 0), 0u);
  s.blob_stored(10);
  EXPECT_EQ(take_id(s, 0), 0u);
  s.blob_stored(11);
  EXPECT_EQ(take_id(s, 0), 1u);
  s.add(task(3, {10}));  // stored already: it goes at once
  EXPECT_EQ(take_id(s, 0), 3u);
}

TEST(api_schedule, a_result_is_passed_on_once) {
  api_schedule s(1);
  s.add(task(1));
  ASSERT_EQ(take_id(s, 0), 1u);
  EXPECT_FALSE(s.answered(1, 1));  // not the worker that holds it
  EXPECT_TRUE(s.answered(0, 1));
  EXPECT_FALSE(s.answered(0, 1));
  EXPECT_EQ(s.held_by(0), 0u);
  s.input_ended();
  EXPECT_TRUE(s.finished());
}

TEST(api_schedule, a_lost_workers_tasks_go_again_first_in_their_order) {
  api_schedule s(1);
  for (std::uint64_t i = 1; i <= 4; ++i) s.add(task(i));
  ASSERT_EQ(take_id(s, 0), 1u);
  ASSERT_EQ(take_id(s, 0), 2u);
  EXPECT_TRUE(s.worker_lost(0).empty());
  EXPECT_EQ(s.retried(), 2u);
  EXPECT_EQ(take_id(s, 1), 1u);
  EXPECT_EQ(take_id(s, 1), 2u);
  EXPECT_EQ(take_id(s, 1), 3u);
  EXPECT_EQ(s.take(1)->attempts, 1u);  // task 4, given once
}

TEST(api_schedule, a_task_whose_retries_are_spent_fails) {
  api_schedule s(1);
  s.add(task(1));
  s.add(task(2));
  ASSERT_EQ(take_id(s, 0), 1u);
  EXPECT_TRUE(s.worker_lost(0).empty());
  ASSERT_EQ(take_id(s, 1), 1u);
  ASSERT_EQ(take_id(s, 1), 2u);
  const auto failed = s.worker_lost(1);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].id, 1u);
  EXPECT_EQ(failed[0].attempts, 2u);
  EXPECT_EQ(take_id(s, 2), 2u);  // its first loss: it goes again
  EXPECT_FALSE(s.answered(1, 1));  // over: a late answer is not passed on
}

TEST(api_schedule, a_cancelled_task_is_dropped_only_before_a_worker_has_it) {
  api_schedule s(0);
  s.add(task(1));
  s.add(task(2));
  s.add(task(3, {9}));
  ASSERT_EQ(take_id(s, 0), 1u);
  EXPECT_FALSE(s.cancel(1));
  EXPECT_TRUE(s.cancel(2));
  EXPECT_TRUE(s.cancel(3));
  s.blob_stored(9);
  EXPECT_EQ(take_id(s, 0), 0u);
  EXPECT_TRUE(s.answered(0, 1));
  s.input_ended();
  EXPECT_TRUE(s.finished());
}

TEST(api_schedule, fail_all_ends_everything_left) {
  api_schedule s(3);
  s.add(task(5));
  s.add(task(4, {1}));
  ASSERT_EQ(take_id(s, 0), 5u);
  EXPECT_EQ(s.fail_all(), (std::vector<std::uint64_t>{4, 5}));
  s.input_ended();
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(s.held_by(0), 0u);
}

}  // namespace
}  // namespace ferry::agent::api
