// What the import hook is told (agent/node/import_gate.hpp), sans-io: which layers hold a name, when a
// request is settled, the replies, a failure and a stop, and the order imports merge into.
#include "agent/node/import_gate.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

namespace ferry::agent::node {
namespace {

namespace json = boost::json;

plan_catalogue sample() {
  plan_catalogue c;
  c.layers.push_back({0, "aa", "workspace", 0, {"main", "nspkg"}, {}});
  c.layers.push_back({1, "bb", "numpy", 1, {"numpy"}, {"numpy"}});
  c.layers.push_back({2, "cc", "nspkg", 2, {"nspkg"}, {"nspkg_extra"}});
  c.layers.push_back({3, "dd", "six", 3, {"six"}, {"six"}});
  c.workspace = 0;
  return c;
}

import_gate opened() {
  import_gate g;
  g.open(sample(), [](const std::string& id) { return "/cache/layers/" + id; });
  return g;
}

TEST(import_gate, a_name_waits_for_every_layer_that_holds_it) {
  auto g = opened();
  EXPECT_EQ(g.holders("module", "nspkg"), (std::vector<std::size_t>{0, 2}));
  EXPECT_EQ(g.holders("module", "json"), std::vector<std::size_t>{});  // no layer: falls through
  EXPECT_EQ(g.holders("dist", "six"), std::vector<std::size_t>{3});
  EXPECT_EQ(g.holders("dist", "*").size(), 4u);
  const auto before = g.generation();
  g.landed("aa");
  EXPECT_GT(g.generation(), before);
  EXPECT_FALSE(g.settled(g.holders("module", "nspkg")));
  g.landed("cc");
  EXPECT_TRUE(g.settled(g.holders("module", "nspkg")));
  EXPECT_EQ(g.names({1, 2}), "numpy, nspkg");
  EXPECT_EQ(g.ids({3}), std::vector<std::string>{"dd"});
  EXPECT_FALSE(g.all_landed());
  EXPECT_EQ(g.pending(), 2u);
}

TEST(import_gate, a_failure_and_a_stop_settle_what_waits_with_the_reason) {
  auto g = opened();
  g.failed("bb", "layer numpy: digest mismatch");
  EXPECT_TRUE(g.settled({1}));
  EXPECT_EQ(g.state_of(1), import_gate::state::failed);
  g.landed("bb");  // a failure stays one
  EXPECT_EQ(g.state_of(1), import_gate::state::failed);
  g.stop("the command ended");
  EXPECT_TRUE(g.settled(g.holders("dist", "*")));
  const auto states = json::parse(g.states_reply()).at("layers").as_array();
  EXPECT_EQ(states.at(1).at("reason").as_string(), "layer numpy: digest mismatch");
  EXPECT_EQ(states.at(3).at("reason").as_string(), "the command ended");
  EXPECT_FALSE(states.at(0).as_object().contains("reason") && states.at(0).at("state") == "ready");
}

TEST(import_gate, hello_says_every_layer_its_names_and_where_it_lands) {
  auto g = opened();
  g.landed("aa");
  const auto reply = g.hello_reply();
  ASSERT_EQ(reply.back(), '\n');
  const auto layers = json::parse(reply).at("layers").as_array();
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers.at(0).at("state").as_string(), "ready");
  EXPECT_EQ(layers.at(2).at("dir").as_string(), "/cache/layers/cc");
  EXPECT_EQ(layers.at(2).at("dists").as_array().at(0).as_string(), "nspkg_extra");
  EXPECT_EQ(layers.at(3).at("state").as_string(), "pending");
}

TEST(import_gate, imports_of_several_processes_merge_first_come_first) {
  auto g = opened();
  g.imported({"json", "six", "numpy"});  // json: no layer's
  g.imported({"nspkg", "six", "main"});
  EXPECT_EQ(g.imported_layers(), (std::vector<std::string>{"six", "numpy", "workspace", "nspkg"}));
}

}  // namespace
}  // namespace ferry::agent::node
