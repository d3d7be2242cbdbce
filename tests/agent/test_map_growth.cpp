// When a map grows past the nodes it began with (agent/map/map_growth.hpp), without nodes.
#include "agent/map/map_growth.hpp"

#include <gtest/gtest.h>

namespace ferry::agent {
namespace {

map_pace pace(std::size_t waiting, std::size_t nodes, double task_seconds, double node_seconds) {
  return map_pace{waiting, nodes, 4, 8, task_seconds, node_seconds};
}

TEST(map_growth, short_tasks_never_grow_a_map) {
  // The newcomer's map: 100 tasks of 50 ms on 2 nodes of 4 slots: all of them run before a node is up.
  const auto g = growth_of(pace(92, 2, 0.05, 3));
  EXPECT_EQ(g.add, 0u);
  EXPECT_LT(g.wait_seconds, 3);
}

TEST(map_growth, nothing_is_known_before_a_task_has_ended) {
  EXPECT_EQ(growth_of(pace(1000, 1, 0, 3)).add, 0u);
}

TEST(map_growth, long_waits_grow_it_up_to_max_nodes) {
  // 100 tasks of a minute on 2 nodes: 13 rounds of a minute; 8 nodes is the most it may have.
  const auto g = growth_of(pace(100, 2, 60, 30));
  EXPECT_EQ(g.add, 6u);
  EXPECT_DOUBLE_EQ(g.wait_seconds, 13 * 60.0);
  EXPECT_NE(growth_line(pace(100, 2, 60, 30), g).find("6 more nodes (8 in all"), std::string::npos);
}

TEST(map_growth, it_grows_only_as_far_as_brings_the_wait_down_to_a_node_start) {
  // 40 tasks of 2 s on 1 node: 20 s of waiting; a node takes 5 s: 40 * 2 / (5 * 4) = 4 nodes in all.
  const auto g = growth_of(pace(40, 1, 2, 5));
  EXPECT_EQ(g.add, 3u);
}

TEST(map_growth, never_more_nodes_than_waiting_tasks_can_use) {
  // 5 waiting tasks of an hour: two nodes of 4 slots take them all; a third would get nothing.
  const auto g = growth_of(pace(5, 1, 3600, 10));
  EXPECT_EQ(g.add, 1u);
  EXPECT_EQ(growth_of(map_pace{5, 1, 1, 8, 3600, 10}).add, 4u);  // one task a node: 5 nodes in all
}

TEST(map_growth, a_wait_shorter_than_a_node_start_keeps_the_size) {
  // 8 tasks of 2 s waiting on 2 nodes of 4: one round, 2 s, under a 10 s start.
  EXPECT_EQ(growth_of(pace(8, 2, 2, 10)).add, 0u);
  EXPECT_EQ(growth_of(pace(0, 2, 100, 1)).add, 0u);
  EXPECT_EQ(growth_of(pace(100, 8, 100, 1)).add, 0u);  // at max_nodes already
}

TEST(map_growth, the_line_says_why_and_by_how_much) {
  const map_pace p{40, 1, 4, 8, 12, 8};
  const auto g = growth_of(p);
  EXPECT_EQ(growth_line(p, g), "40 tasks would wait 120 s at 12.0 s a task; a new node takes about 8 s: 7 more nodes "
                               "(8 in all, nodes.max_nodes 8)");
}

}  // namespace
}  // namespace ferry::agent
