// `ferry pool stats`: the figures of hand-written traces of a pool's acquires, releases and nodes leaving,
// worked out in the comments; an acquire whose agent was killed; traces without a pool; the command as a
// user runs it.
#include "agent/cli/report.hpp"
#include "agent/pool/pool_stats.hpp"
#include "support/process.hpp"
#include "support/sample_traces.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"
#include "tracing/task_tree.hpp"
#include "tracing/trace_file.hpp"

#include <boost/json/parse.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

namespace ferry::pool_stats_tests {

using test::msg;
using test::run_ferry;
using test::temp_dir;
namespace types = action_types::pool;

// An action around an agent's pool actions that is no job (as the Python API's client leasing for itself).
constexpr std::string_view holder = "ferry:test:holder";

std::string acquire_start(std::string_view level, double t, std::string_view tenant, int slots, std::string_view lease,
                          std::string_view uuid) {
  return msg(level, t, types::acquire, "started",
             fmt::format(R"(,"tenant":"{}","slots":{},"lease":"{}")", tenant, slots, lease), uuid);
}

std::string acquired(std::string_view level, double t, std::string_view node, bool joined, std::string_view uuid) {
  return msg(level, t, types::acquire, "succeeded",
             fmt::format(R"(,"node":"{}","joined":{},"conflicts":0,"waits":0)", node, joined), uuid);
}

std::string release(std::string_view level, double t0, double t1, std::string_view node, std::string_view lease,
                    std::string_view uuid) {
  const auto first = std::string(level) + ",1", last = std::string(level) + ",2";
  return msg(first, t0, types::release, "started", fmt::format(R"(,"node":"{}","lease":"{}")", node, lease), uuid) +
         msg(last, t1, types::release, "succeeded", R"(,"gone":false)", uuid);
}

std::string node_left(double t, std::string_view node, std::string_view uuid) {
  return fmt::format(R"({{"task_uuid":"{}","task_level":[1],"timestamp":{},"message_type":"{}","node":"{}","reason":"idle"}})",
                     uuid, t, types::node_left, node) +
         "\n";
}

// Two tenants on two-slot nodes, idle timeout 60 s:
//   ann's run 1000..1200: acquire a1 1000..1010 makes n0 (joined), released 1100..1101;
//                         acquire a2 1101..1103 on n0, never released: ends with the run at 1200.
//   bob's run 1005..1300: acquire b1 1005..1007 on n0, released 1050..1051;
//                         acquire b2 (2 slots) 1060..1090 makes n1 (joined), released 1150;
//                         acquire 1160..1220 fails (pool_full).
//   n1 leaves at 1180.
// Waits: ann 10, 2; bob 2, 30, 60.
// n0: 1000 .. its last lease's end 1200 + 60 = 260 s; leases a1 1010..1101, b1 1007..1051, a2 1103..1200;
//     idle 1101..1103 and 1200..1260 (both after ann's leases): 62 s.
// n1: 1060 .. left at 1180 (before 1150 + 60) = 120 s; lease b2 1090..1150 (2 slots); idle 1150..1180: 30 s
//     (its boot, 1060..1090, is not idle).
// Slot-seconds: ann 91 + 97 = 188, bob 44 + 2 x 60 = 164; pool 352 of 380 node-seconds x 2 slots.
// Tenants' node-seconds while they held a lease: ann 91 + 97 = 188, bob 44 + 60 = 104.
std::string two_tenants() {
  return msg("1", 1000, action_types::run::job, "started", R"(,"tenant":"ann")", "A") +
         acquire_start("2,1", 1000, "ann", 1, "a1", "A") + acquired("2,2", 1010, "n0", true, "A") +
         release("3", 1100, 1101, "n0", "a1", "A") + acquire_start("4,1", 1101, "ann", 1, "a2", "A") +
         acquired("4,2", 1103, "n0", false, "A") + msg("5", 1200, action_types::run::job, "succeeded", "", "A") +
         msg("1", 1005, action_types::run::job, "started", R"(,"tenant":"bob")", "B") +
         acquire_start("2,1", 1005, "bob", 1, "b1", "B") + acquired("2,2", 1007, "n0", false, "B") +
         release("3", 1050, 1051, "n0", "b1", "B") + acquire_start("4,1", 1060, "bob", 2, "b2", "B") +
         acquired("4,2", 1090, "n1", true, "B") + release("5", 1150, 1150, "n1", "b2", "B") +
         acquire_start("6,1", 1160, "bob", 1, "b3", "B") +
         msg("6,2", 1220, types::acquire, "failed", R"(,"exception":"pool_full","reason":"no room","conflicts":0,"waits":3)",
             "B") +
         msg("7", 1300, action_types::run::job, "succeeded", "", "B") + node_left(1180, "n1", "C");
}

struct traces_in_memory {
  tracing::trace_set set;
  std::vector<tracing::task_tree> tasks;
};

std::unique_ptr<traces_in_memory> read(temp_dir& dir, const std::string& text) {
  diagnostics diag;
  auto set = tracing::read_traces({dir.write("pool.jsonl", text)}, diag);
  EXPECT_TRUE(set) << diag.message;
  EXPECT_TRUE(set->problems.empty());
  auto out = std::make_unique<traces_in_memory>();
  out->set = std::move(*set);
  out->tasks = tracing::build_task_trees(out->set);
  return out;
}

agent::pool::pool_stats stats_of(const std::string& text, int slots = 2, double idle = 60) {
  temp_dir dir;
  const auto t = read(dir, text);
  return agent::pool::compute_pool_stats(t->set, t->tasks, {slots, idle});
}

TEST(pool_stats, two_tenants_waits_hours_utilisation_and_idle) {
  const auto s = stats_of(two_tenants());
  EXPECT_EQ(s.leases, 4u);
  EXPECT_EQ(s.releases, 3u);
  EXPECT_EQ(s.nodes, 2u);
  EXPECT_EQ(s.node_left, 1u);
  // Pool waits 2, 2, 10, 30, 60: p50 the 3rd, p95 the 5th, mean 104 / 5.
  EXPECT_EQ(s.pool.acquires, 5u);
  EXPECT_EQ(s.pool.failed, 1u);
  EXPECT_EQ(s.pool.unfinished, 0u);
  EXPECT_DOUBLE_EQ(s.pool.wait_p50, 10);
  EXPECT_DOUBLE_EQ(s.pool.wait_p95, 60);
  EXPECT_DOUBLE_EQ(s.pool.wait_max, 60);
  EXPECT_DOUBLE_EQ(s.pool.wait_mean, 104.0 / 5);
  EXPECT_DOUBLE_EQ(s.pool.node_seconds, 380);
  EXPECT_DOUBLE_EQ(s.pool.leased_slot_seconds, 352);
  EXPECT_DOUBLE_EQ(s.pool.idle_node_seconds, 92);
  EXPECT_DOUBLE_EQ(s.pool.utilisation, 352.0 / (380 * 2));

  ASSERT_EQ(s.tenants.size(), 2u);
  const auto& ann = s.tenants.at("ann");
  EXPECT_EQ(ann.acquires, 2u);
  EXPECT_EQ(ann.failed, 0u);
  EXPECT_DOUBLE_EQ(ann.wait_p50, 2);
  EXPECT_DOUBLE_EQ(ann.wait_p95, 10);
  EXPECT_DOUBLE_EQ(ann.leased_slot_seconds, 188);
  EXPECT_DOUBLE_EQ(ann.node_seconds, 188);
  EXPECT_DOUBLE_EQ(ann.utilisation, 0.5);
  EXPECT_DOUBLE_EQ(ann.idle_node_seconds, 62);
  const auto& bob = s.tenants.at("bob");
  EXPECT_EQ(bob.acquires, 3u);
  EXPECT_EQ(bob.failed, 1u);
  EXPECT_DOUBLE_EQ(bob.wait_p50, 30);
  EXPECT_DOUBLE_EQ(bob.wait_p95, 60);
  EXPECT_DOUBLE_EQ(bob.leased_slot_seconds, 164);
  EXPECT_DOUBLE_EQ(bob.node_seconds, 104);
  EXPECT_DOUBLE_EQ(bob.utilisation, 164.0 / (104 * 2));
  EXPECT_DOUBLE_EQ(bob.idle_node_seconds, 30);
}

TEST(pool_stats, the_idle_timeout_and_slots_per_node_shape_node_hours_and_utilisation) {
  // Idle 10 s: n0 ends at 1210 (idle 2 + 10), n1 at 1160 (idle 10).
  const auto s = stats_of(two_tenants(), 1, 10);
  EXPECT_DOUBLE_EQ(s.pool.node_seconds, 210 + 100);
  EXPECT_DOUBLE_EQ(s.pool.idle_node_seconds, 12 + 10);
  EXPECT_DOUBLE_EQ(s.pool.utilisation, 352.0 / 310);
}

// cid's agent was killed while it waited: its acquire and run never ended, the task's last message is a
// wait that ended at 2030. dan's acquire, in a task without a job, made n5 at 2000..2005, and the lease
// was never given back: it ends with the task's last message, 2100, the traces' last too, which ends n5
// before its idle timeout.
TEST(pool_stats, an_acquire_that_never_ended_is_a_wait_that_got_nothing) {
  const auto s = stats_of(msg("1", 2000, action_types::run::job, "started", R"(,"tenant":"cid")", "K") +
                          acquire_start("2,1", 2000, "cid", 1, "c1", "K") +
                          msg("2,2,1", 2001, types::wait, "started", R"(,"until":2030)", "K") +
                          msg("2,2,2", 2030, types::wait, "succeeded", "", "K") +
                          msg("1", 2000, holder, "started", "", "D") + acquire_start("2,1", 2000, "dan", 1, "d1", "D") +
                          acquired("2,2", 2005, "n5", true, "D") +
                          msg("3,1", 2100, types::renew, "started", R"(,"node":"n5","lease":"d1")", "D"));
  EXPECT_EQ(s.pool.acquires, 2u);
  EXPECT_EQ(s.pool.unfinished, 1u);
  EXPECT_EQ(s.pool.failed, 0u);
  const auto& cid = s.tenants.at("cid");
  EXPECT_EQ(cid.unfinished, 1u);
  EXPECT_DOUBLE_EQ(cid.wait_max, 30);
  EXPECT_DOUBLE_EQ(cid.node_seconds, 0);
  EXPECT_DOUBLE_EQ(cid.leased_slot_seconds, 0);
  EXPECT_DOUBLE_EQ(cid.utilisation, 0);
  EXPECT_EQ(s.leases, 1u);
  EXPECT_DOUBLE_EQ(s.pool.node_seconds, 100);
  EXPECT_DOUBLE_EQ(s.pool.leased_slot_seconds, 95);
  EXPECT_DOUBLE_EQ(s.pool.idle_node_seconds, 0);
}

// Names are reused: n0 made at 0, leased to 10, gone at 20; made again at 100, leased 105..110. Two lives,
// 20 s and 110 + 60 - 100 = 70 s (the traces end at 200).
TEST(pool_stats, a_name_made_again_after_its_node_left_is_another_node) {
  const auto s = stats_of(msg("1", 0, holder, "started", "", "X") + acquire_start("2,1", 0, "ann", 1, "x", "X") +
                          acquired("2,2", 1, "n0", true, "X") + release("3", 10, 10, "n0", "x", "X") +
                          msg("4", 10, holder, "succeeded", "", "X") + node_left(20, "n0", "L") +
                          msg("1", 100, holder, "started", "", "Y") + acquire_start("2,1", 100, "ann", 1, "y", "Y") +
                          acquired("2,2", 105, "n0", true, "Y") + release("3", 110, 110, "n0", "y", "Y") +
                          msg("4", 200, holder, "succeeded", "", "Y"));
  EXPECT_EQ(s.nodes, 2u);
  EXPECT_DOUBLE_EQ(s.pool.node_seconds, 20 + 70);
  EXPECT_DOUBLE_EQ(s.pool.leased_slot_seconds, 9 + 5);
  EXPECT_DOUBLE_EQ(s.pool.idle_node_seconds, 10 + 60);
}

TEST(pool_stats, traces_without_a_pool_are_empty) {
  const auto s = stats_of(test::map_trace());
  EXPECT_TRUE(s.empty());
  EXPECT_TRUE(s.tenants.empty());
  EXPECT_FALSE(stats_of(two_tenants()).empty());
}

struct pool_stats_cli : ::testing::Test {
  temp_dir dir;
  test::process_options opts;
  void SetUp() override {
    test::use_home(opts, dir.path());
    opts.unset_env = {"FERRY_TASK_ID"};
  }
};

TEST_F(pool_stats_cli, prints_the_figures_as_json) {
  const auto traces = dir.write("day.jsonl", two_tenants());
  const auto r = run_ferry({"pool", "stats", traces.string(), "--slots", "2", "--idle", "1m", "--json"}, opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto v = boost::json::parse(r.out);
  EXPECT_EQ(v.at("node_slots"), 2);
  EXPECT_EQ(v.at("idle_timeout").to_number<double>(), 60);
  EXPECT_EQ(v.at("nodes"), 2);
  EXPECT_EQ(v.at("leases"), 4);
  const auto& pool = v.at("pool");
  EXPECT_EQ(pool.at("acquires"), 5);
  EXPECT_EQ(pool.at("failed"), 1);
  EXPECT_EQ(pool.at("wait_p50").to_number<double>(), 10);
  EXPECT_EQ(pool.at("wait_p95").to_number<double>(), 60);
  EXPECT_EQ(pool.at("node_seconds").to_number<double>(), 380);
  EXPECT_EQ(pool.at("idle_node_seconds").to_number<double>(), 92);
  EXPECT_EQ(pool.at("leased_slot_seconds").to_number<double>(), 352);
  EXPECT_NEAR(pool.at("utilisation").to_number<double>(), 352.0 / 760, 1e-9);
  const auto& bob = v.at("tenants").at("bob");
  EXPECT_EQ(bob.at("wait_p50").to_number<double>(), 30);
  EXPECT_EQ(bob.at("node_seconds").to_number<double>(), 104);
  EXPECT_EQ(bob.at("idle_node_seconds").to_number<double>(), 30);
  EXPECT_EQ(v.at("tenants").at("ann").at("utilisation").to_number<double>(), 0.5);
}

TEST_F(pool_stats_cli, takes_slots_and_idle_timeout_from_the_configuration_and_prints_a_table) {
  // pool.node_slots 1 and pool.idle_timeout 10m by default: n0 runs from 1000 until the traces' last
  // message at 1300 (before 1200 + 10m), n1 1060..1180.
  const auto traces = dir.write("day.jsonl", two_tenants());
  const auto r = run_ferry({"pool", "stats", traces.string(), "--json"}, opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto v = boost::json::parse(r.out);
  EXPECT_EQ(v.at("node_slots"), 1);
  EXPECT_EQ(v.at("pool").at("node_seconds").to_number<double>(), 300 + 120);
  EXPECT_NEAR(v.at("pool").at("utilisation").to_number<double>(), 352.0 / 420, 1e-9);
  const auto text = run_ferry({"pool", "stats", traces.string(), "--slots", "2", "--idle", "1m"}, opts);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("5 acquires of 2 tenants, 4 leases on 2 nodes (2 slots per node"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("(pool)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("46.3%"), std::string::npos) << text.out;
}

TEST_F(pool_stats_cli, says_so_when_the_traces_hold_no_pool_and_refuses_bad_flags) {
  const auto none = run_ferry({"pool", "stats", dir.write("map.jsonl", test::map_trace()).string()}, opts);
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no pool action in these traces"), std::string::npos) << none.err;
  const auto traces = dir.write("day.jsonl", two_tenants());
  const auto slots = run_ferry({"pool", "stats", traces.string(), "--slots", "0"}, opts);
  EXPECT_EQ(slots.exit_code, 2);
  EXPECT_NE(slots.err.find(agent::error_line("--slots: at least 1 slot per node")), std::string::npos) << slots.err;
  const auto idle = run_ferry({"pool", "stats", traces.string(), "--idle", "soon"}, opts);
  EXPECT_EQ(idle.exit_code, 2);
  EXPECT_NE(idle.err.find("--idle: 'soon' is not a duration"), std::string::npos) << idle.err;
}

}  // namespace ferry::pool_stats_tests
