// The pool simulator: waits, node-seconds and utilisation of small workloads worked out by hand, each
// rule of the policy (boot, the minimum, the maximum, the tenant cap, the idle timeout) on its own, and
// the same answer twice.
#include "agent/pool/pool_simulator.hpp"

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

namespace ferry::agent::pool {
namespace {

pool_policy policy(int min_nodes, int max_nodes, double boot, double idle, int capacity = 1, int per_tenant = 0) {
  pool_policy p;
  p.min_nodes = min_nodes;
  p.max_nodes = max_nodes;
  p.boot = boot;
  p.idle_timeout = idle;
  p.capacity = capacity;
  p.max_nodes_per_tenant = per_tenant;
  return p;
}

TEST(pool_simulator, a_job_on_an_empty_pool_waits_for_a_node_to_boot) {
  const auto r = simulate({{0, "ann", 1, 5}}, policy(0, 4, 10, 60));
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_DOUBLE_EQ(r.starts[0], 10);
  EXPECT_DOUBLE_EQ(r.waits.max, 10);
  EXPECT_DOUBLE_EQ(r.end, 15);
  // Booting 10 s, busy 5 s, then idle until its timeout: 75 node-seconds, 60 of them idle.
  EXPECT_DOUBLE_EQ(r.node_seconds, 75);
  EXPECT_DOUBLE_EQ(r.idle_node_seconds, 60);
  EXPECT_DOUBLE_EQ(r.busy_slot_seconds, 5);
  EXPECT_DOUBLE_EQ(r.utilisation, 5.0 / 75.0);
  EXPECT_EQ(r.nodes, (std::vector<std::pair<double, int>>{{0, 1}, {75, 0}}));
}

TEST(pool_simulator, a_warm_minimum_means_no_wait_and_costs_from_the_start) {
  const auto r = simulate({{20, "ann", 1, 5}}, policy(1, 4, 10, 60));
  EXPECT_DOUBLE_EQ(r.starts[0], 20);
  EXPECT_DOUBLE_EQ(r.waits.max, 0);
  // The minimum runs from 0 until the work ends at 25.
  EXPECT_DOUBLE_EQ(r.node_seconds, 25);
  EXPECT_DOUBLE_EQ(r.idle_node_seconds, 20);
}

TEST(pool_simulator, the_maximum_makes_later_jobs_wait_for_a_slot) {
  // Three jobs at once on at most two one-slot nodes: the third takes the first slot freed.
  const auto r = simulate({{0, "ann", 1, 10}, {0, "bob", 1, 20}, {0, "cid", 1, 5}}, policy(0, 2, 0, 0));
  EXPECT_DOUBLE_EQ(r.starts[0], 0);
  EXPECT_DOUBLE_EQ(r.starts[1], 0);
  EXPECT_DOUBLE_EQ(r.starts[2], 10);
  EXPECT_DOUBLE_EQ(r.waits.max, 10);
  EXPECT_DOUBLE_EQ(r.waits.p50, 0);
  EXPECT_DOUBLE_EQ(r.end, 20);
  // One node busy from 0 to 15 (the first job, then the third), the other from 0 to 20; each stops when
  // idle (timeout 0).
  EXPECT_DOUBLE_EQ(r.node_seconds, 35);
  EXPECT_DOUBLE_EQ(r.utilisation, 1.0);
}

TEST(pool_simulator, a_waiting_job_sees_a_freed_slot_at_its_next_read_of_the_pool) {
  // One one-slot node, polls every 4 s. ann holds it from 0 to 10. bob arrives at 1 and reads at 1, 5, 9
  // and 13: he starts at 13, not 10. cid arrives at 12, after the slot was freed and before bob's read:
  // she reads at once and takes it; bob, reading at 13, 17, ..., starts when cid ends at 15, at 17.
  auto p = policy(1, 1, 0, 60);
  p.poll = 4;
  const auto r = simulate({{0, "ann", 1, 10}, {1, "bob", 1, 2}, {12, "cid", 1, 3}}, p);
  EXPECT_DOUBLE_EQ(r.starts[0], 0);
  EXPECT_DOUBLE_EQ(r.starts[2], 12);
  EXPECT_DOUBLE_EQ(r.starts[1], 17);
  EXPECT_DOUBLE_EQ(r.waits.mean, (0 + 16 + 0) / 3.0);
  // Without polls (0), the freed slot is bob's at 10.
  p.poll = 0;
  const auto at_once = simulate({{0, "ann", 1, 10}, {1, "bob", 1, 2}, {12, "cid", 1, 3}}, p);
  EXPECT_DOUBLE_EQ(at_once.starts[1], 10);
  EXPECT_DOUBLE_EQ(at_once.starts[2], 12);
}

TEST(pool_simulator, a_node_booted_for_a_waiting_job_is_its_own_at_once_whatever_its_polls) {
  // Boot 3 s, polls every 10 s: ann waits for the node made for her, not for her next read.
  auto p = policy(0, 2, 3, 60);
  p.poll = 10;
  const auto r = simulate({{0, "ann", 1, 5}}, p);
  EXPECT_DOUBLE_EQ(r.starts[0], 3);
  // Two slots on a warm minimum of one: the node made for the second is ready at 3, and ann starts then.
  auto warm = policy(1, 2, 3, 60);
  warm.poll = 10;
  const auto two = simulate({{0, "ann", 2, 5}}, warm);
  EXPECT_DOUBLE_EQ(two.starts[0], 3);
}

TEST(pool_simulator, slots_are_packed_onto_busy_nodes_before_idle_ones) {
  // Two-slot nodes: the second job shares the first node, so one node is enough.
  const auto r = simulate({{0, "ann", 1, 10}, {1, "bob", 1, 10}}, policy(0, 4, 0, 0, 2));
  EXPECT_DOUBLE_EQ(r.starts[1], 1);
  EXPECT_EQ(r.nodes.size(), 2u);  // one node up, then down
  EXPECT_DOUBLE_EQ(r.node_seconds, 11);
}

TEST(pool_simulator, the_tenant_cap_holds_one_tenant_back_and_not_the_others) {
  const std::vector<sim_job> jobs{{0, "ann", 1, 10}, {0, "ann", 1, 10}, {0, "bob", 1, 10}};
  const auto r = simulate(jobs, policy(0, 4, 0, 0, 1, 1));
  EXPECT_DOUBLE_EQ(r.starts[0], 0);
  EXPECT_DOUBLE_EQ(r.starts[1], 10);  // ann's second job waits for her first
  EXPECT_DOUBLE_EQ(r.starts[2], 0);
  EXPECT_DOUBLE_EQ(r.tenants.at("ann").max, 10);
  EXPECT_DOUBLE_EQ(r.tenants.at("bob").max, 0);
}

TEST(pool_simulator, an_idle_node_stops_after_its_timeout_and_the_next_job_boots_another) {
  // Idle timeout 30: a job 20 s after the first ends reuses the node; one 100 s later waits for a boot.
  const auto reused = simulate({{0, "ann", 1, 10}, {40, "ann", 1, 10}}, policy(0, 1, 5, 30));
  EXPECT_DOUBLE_EQ(reused.starts[1], 40);
  const auto rebooted = simulate({{0, "ann", 1, 10}, {100, "ann", 1, 10}}, policy(0, 1, 5, 30));
  EXPECT_DOUBLE_EQ(rebooted.starts[1], 105);
  // First node: 0 to 15 busy, stops at 45; second: 100 to 115, stops at 145.
  EXPECT_DOUBLE_EQ(rebooted.node_seconds, 45 + 45);
  EXPECT_EQ(rebooted.nodes, (std::vector<std::pair<double, int>>{{0, 1}, {45, 0}, {100, 1}, {145, 0}}));
}

TEST(pool_simulator, the_minimum_never_stops) {
  const auto r = simulate({{0, "ann", 1, 10}, {100, "ann", 1, 10}}, policy(1, 1, 5, 30));
  EXPECT_DOUBLE_EQ(r.starts[1], 100);
  EXPECT_DOUBLE_EQ(r.node_seconds, 110);
}

TEST(pool_simulator, a_job_larger_than_the_pool_is_counted_and_never_started) {
  const auto r = simulate({{0, "ann", 3, 10}, {0, "bob", 1, 10}}, policy(0, 2, 0, 0));
  EXPECT_EQ(r.unplaceable, 1u);
  EXPECT_DOUBLE_EQ(r.starts[1], 0);
  EXPECT_EQ(r.waits.jobs, 1u);
}

TEST(pool_simulator, a_job_of_no_duration_starts_and_ends_at_once) {
  const auto r = simulate({{0, "ann", 1, 0}, {0, "bob", 1, 5}}, policy(1, 1, 0, 0));
  EXPECT_DOUBLE_EQ(r.starts[0], 0);
  EXPECT_DOUBLE_EQ(r.starts[1], 0);  // the slot the first job held for no time
  EXPECT_DOUBLE_EQ(r.end, 5);
}

TEST(pool_simulator, a_policy_that_cannot_run_is_refused) {
  EXPECT_THROW(simulate({}, policy(3, 2, 0, 0)), std::invalid_argument);
  EXPECT_THROW(simulate({}, policy(0, 0, 0, 0)), std::invalid_argument);
  EXPECT_THROW(simulate({{0, "ann", 0, 1}}, policy(0, 1, 0, 0)), std::invalid_argument);
  EXPECT_THROW(simulate({{-1, "ann", 1, 1}}, policy(0, 1, 0, 0)), std::invalid_argument);
}

TEST(pool_simulator, random_days_give_the_same_answer_twice_and_keep_their_books) {
  std::mt19937 rng(7);
  std::vector<sim_job> jobs;
  for (int i = 0; i < 200; ++i)
    jobs.push_back({std::uniform_real_distribution<double>(0, 600)(rng), "t" + std::to_string(i % 5),
                    std::uniform_int_distribution<int>(1, 4)(rng), std::uniform_real_distribution<double>(1, 60)(rng)});
  for (int min_nodes : {0, 2}) {
    const auto p = policy(min_nodes, 8, 45, 300, 2, 3);
    const auto a = simulate(jobs, p);
    const auto b = simulate(jobs, p);
    EXPECT_EQ(a.starts, b.starts);
    EXPECT_EQ(a.nodes, b.nodes);
    EXPECT_EQ(a.unplaceable, 0u);
    double busy = 0;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_GE(a.starts[i], jobs[i].arrival);
      busy += jobs[i].slots * jobs[i].duration;
    }
    EXPECT_NEAR(a.busy_slot_seconds, busy, 1e-6);
    EXPECT_LE(a.utilisation, 1.0);
    EXPECT_GT(a.utilisation, 0.0);
    EXPECT_LE(a.idle_node_seconds, a.node_seconds);
    for (const auto& [t, count] : a.nodes) {
      EXPECT_GE(count, 0);
      EXPECT_LE(count, 8);
    }
    EXPECT_EQ(a.nodes.back().second, 0);
  }
}

}  // namespace
}  // namespace ferry::agent::pool
