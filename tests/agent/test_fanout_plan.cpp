// Who fetches from whom in a fan-out: seeds from storage, then a tree in arrival order; a parent's
// server known once it listens; a parent settled once every child slot within the job arrived and landed.
#include "agent/materialise/fanout_plan.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

namespace ferry::agent {
namespace {

std::string n(std::size_t i) { return fmt::format("n{}", i); }

TEST(fanout_plan, seeds_fetch_from_storage_and_the_rest_form_a_tree_in_arrival_order) {
  fanout_plan plan(2, 3, 11);
  for (std::size_t i = 0; i < 11; ++i) {
    const auto p = plan.arrive(n(i));
    EXPECT_EQ(p.index, i);
    if (i < 2) {
      EXPECT_FALSE(p.parent) << i;
    } else {
      ASSERT_TRUE(p.parent) << i;
      EXPECT_EQ(*p.parent, n((i - 2) / 3)) << i;
    }
    EXPECT_EQ(plan.parent_of(n(i)), p.parent) << i;
    // Children of node k are 2 + 3k .. 2 + 3k + 2: node k serves when 2 + 3k < 11.
    EXPECT_EQ(p.serves, 2 + 3 * i < 11) << i;
  }
  EXPECT_EQ(plan.children_of(n(0)), (std::vector<std::string>{n(2), n(3), n(4)}));
  EXPECT_EQ(plan.children_of(n(2)), (std::vector<std::string>{n(8), n(9), n(10)}));
  EXPECT_TRUE(plan.children_of(n(3)).empty());
  // Storage serves each shard to the seeds alone: every other node has a parent.
  std::size_t from_storage = 0;
  for (std::size_t i = 0; i < 11; ++i) from_storage += plan.arrive(n(i)).parent ? 0 : 1;
  EXPECT_EQ(from_storage, 2u);
  EXPECT_FALSE(plan.parent_of("never-came"));
}

TEST(fanout_plan, a_child_fetches_from_storage_until_its_parent_listens) {
  fanout_plan plan(1, 2, 3);
  plan.arrive(n(0));
  plan.arrive(n(1));
  EXPECT_EQ(plan.source_of(n(0)), "");
  EXPECT_EQ(plan.source_of(n(1)), "");
  plan.serving(n(0), "http://10.200.0.2:4000");
  EXPECT_EQ(plan.source_of(n(1)), "http://10.200.0.2:4000");
  plan.arrive(n(2));
  EXPECT_EQ(plan.source_of(n(2)), "http://10.200.0.2:4000");
  plan.serving(n(0), "");  // its server ended: later children go to storage
  EXPECT_EQ(plan.source_of(n(2)), "");
  EXPECT_EQ(plan.arrive(n(1)).index, 1u);  // a node arriving again keeps its place
}

TEST(fanout_plan, a_parent_is_settled_once_every_child_within_the_job_arrived_and_landed) {
  fanout_plan plan(1, 2, 4);  // n0's children: n1, n2; n1's: n3 (n4 would be beyond the job)
  plan.arrive(n(0));
  plan.arrive(n(1));
  EXPECT_FALSE(plan.children_settled(n(0)));  // n2 has not arrived
  plan.arrive(n(2));
  plan.landed(n(1));
  EXPECT_FALSE(plan.children_settled(n(0)));
  plan.landed(n(2));
  EXPECT_TRUE(plan.children_settled(n(0)));
  EXPECT_FALSE(plan.children_settled(n(1)));
  plan.arrive(n(3));
  plan.landed(n(3));
  EXPECT_TRUE(plan.children_settled(n(1)));
  EXPECT_TRUE(plan.children_settled(n(2)));  // no slot within the job
  EXPECT_TRUE(plan.children_settled("unknown"));
}

}  // namespace
}  // namespace ferry::agent
