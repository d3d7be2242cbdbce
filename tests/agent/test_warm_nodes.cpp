// The warm minimum: which running nodes of a provider are pinned, given the registry and nodes.min_nodes.
#include "agent/provide/warm_nodes.hpp"

#include <gtest/gtest.h>

namespace ferry::agent {
namespace {

using provision::node;
using provision::node_state;
using ids = std::vector<std::string>;

node make(std::string id, node_state state = node_state::running, bool pinned = false,
          std::string provider = "local") {
  node n;
  n.id = std::move(id);
  n.provider = std::move(provider);
  n.state = state;
  if (pinned) pin(n);
  return n;
}

TEST(warm_nodes, none_without_a_minimum) {
  EXPECT_EQ(warm_nodes({make("a"), make("b")}, "local", 0), ids{});
  EXPECT_EQ(warm_nodes({}, "local", 2), ids{});
}

TEST(warm_nodes, the_earliest_running_nodes_make_up_the_minimum) {
  EXPECT_EQ(warm_nodes({make("a"), make("b"), make("c")}, "local", 1), (ids{"a"}));
  EXPECT_EQ(warm_nodes({make("a"), make("b"), make("c")}, "local", 2), (ids{"a", "b"}));
  // Fewer running than the minimum: all of them.
  EXPECT_EQ(warm_nodes({make("a"), make("b")}, "local", 3), (ids{"a", "b"}));
}

TEST(warm_nodes, nodes_pinned_before_count_first_and_stay_pinned) {
  EXPECT_EQ(warm_nodes({make("a"), make("b", node_state::running, true), make("c")}, "local", 1), (ids{"b"}));
  EXPECT_EQ(warm_nodes({make("a"), make("b", node_state::running, true), make("c")}, "local", 2), (ids{"a", "b"}));
  // A minimum lowered since: the pinned ones are not unpinned.
  EXPECT_EQ(warm_nodes({make("a", node_state::running, true), make("b", node_state::running, true)}, "local", 1),
            (ids{"a", "b"}));
}

TEST(warm_nodes, only_running_nodes_of_that_provider_count_or_get_pinned) {
  // A pinned node that stopped (or ended) no longer keeps the minimum: the next running one does.
  EXPECT_EQ(warm_nodes({make("a", node_state::stopped, true), make("b"), make("c")}, "local", 1), (ids{"b"}));
  EXPECT_EQ(warm_nodes({make("a", node_state::terminated, true), make("b")}, "local", 1), (ids{"b"}));
  EXPECT_EQ(warm_nodes({make("a", node_state::pending), make("b")}, "local", 1), (ids{"b"}));
  // Another provider's nodes, pinned or not, are its own minimum's.
  EXPECT_EQ(warm_nodes({make("x", node_state::running, true, "ec2"), make("y", node_state::running, false, "ec2"),
                        make("b")},
                       "local", 1),
            (ids{"b"}));
  EXPECT_EQ(warm_nodes({make("x", node_state::running, false, "ec2"), make("b")}, "ec2", 1), (ids{"x"}));
}

TEST(warm_nodes, pinned_is_read_from_the_details) {
  auto n = make("a");
  EXPECT_FALSE(is_pinned(n));
  pin(n);
  EXPECT_TRUE(is_pinned(n));
  EXPECT_EQ(n.details.at("pinned").as_bool(), true);
  n.details["pinned"] = "yes";  // not what ferry writes
  EXPECT_FALSE(is_pinned(n));
}

}  // namespace
}  // namespace ferry::agent
