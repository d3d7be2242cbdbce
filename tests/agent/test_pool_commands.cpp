// `ferry pool simulate` as a user runs it, on hand-built traces whose answers are worked out in the comments;
// and the workload it reads from traces.
#include "agent/cli/report.hpp"
#include "agent/pool/pool_workload.hpp"
#include "support/process.hpp"
#include "support/sample_traces.hpp"
#include "support/synthetic_runs.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"
#include "tracing/task_tree.hpp"
#include "tracing/trace_file.hpp"
#include "tracing/trace_stats.hpp"

#include <boost/json/parse.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace ferry {
namespace {

using test::msg;
using test::run_ferry;
using test::temp_dir;

// A run of `tenant` from t0 holding node `node` for one task of `task` seconds, from t0 + 2 (after its
// node's readiness) to t0 + 2 + task; the run ends a second later.
std::string tenant_run(std::string_view uuid, double t0, std::string_view tenant, std::string_view node, double task) {
  const auto on = fmt::format(R"(,"node":"{}")", node);
  return msg("1", t0, action_types::run::job, "started", fmt::format(R"(,"tenant":"{}")", tenant), uuid) +
         msg("2,1", t0, action_types::provision::node, "started", on, uuid) +
         msg("2,2", t0 + 2, action_types::provision::node, "succeeded", "", uuid) +
         msg("3,1", t0 + 2, action_types::agent::task, "started", on, uuid) +
         msg("3,2", t0 + 2 + task, action_types::agent::task, "succeeded", R"(,"exit_code":0)", uuid) +
         msg("4", t0 + 3 + task, action_types::run::job, "succeeded", "", uuid);
}

tracing::trace_stats stats_of(temp_dir& dir, const std::string& name, const std::string& text) {
  diagnostics diag;
  auto set = tracing::read_traces({dir.write(name, text)}, diag);
  EXPECT_TRUE(set) << diag.message;
  return tracing::compute_stats(*set, tracing::build_task_trees(*set));
}

TEST(pool_workload, a_job_is_its_start_tenant_nodes_and_the_span_of_its_tasks) {
  temp_dir dir;
  const auto s = stats_of(dir, "two.jsonl",
                          tenant_run("A", 1000, "ann", "n1", 10) + tenant_run("B", 1030, "bob", "n2", 4) + test::map_trace());
  const auto jobs = agent::pool::workload_from(s);
  ASSERT_EQ(jobs.size(), 3u);
  // By start: the map (1000, no tenant) and ann's run (1000), then bob's (1030).
  std::map<std::string, agent::pool::sim_job> by_tenant;
  for (const auto& j : jobs) by_tenant[j.tenant] = j;
  EXPECT_EQ(by_tenant.at("ann").arrival, 0);
  EXPECT_EQ(by_tenant.at("ann").slots, 1);
  EXPECT_EQ(by_tenant.at("ann").duration, 10);
  EXPECT_EQ(by_tenant.at("bob").arrival, 30);
  EXPECT_EQ(by_tenant.at("bob").duration, 4);
  // The map: two nodes, tasks from 1005 to 1018.
  EXPECT_EQ(by_tenant.at("-").slots, 2);
  EXPECT_EQ(by_tenant.at("-").duration, 13);
}

// A run on a team pool: its trace names the record it leased (node-000) and one it only wrote to in a
// conflict (node-001) besides the node its task ran on (local-a): it held one slot.
TEST(pool_workload, a_job_on_a_pool_holds_the_slots_of_the_nodes_its_tasks_ran_on_not_the_records_it_named) {
  temp_dir dir;
  const auto s = stats_of(
      dir, "pool.jsonl",
      msg("1", 100, action_types::run::job, "started", "", "P") +
          msg("2,1", 100, action_types::pool::acquire, "started", R"(,"tenant":"ann","slots":1,"lease":"l1")", "P") +
          msg("2,2,1", 100.1, action_types::pool::write, "started", R"(,"node":"node-001","condition":"if_match")", "P") +
          msg("2,2,2", 100.2, action_types::pool::write, "failed", R"(,"exception":"x","reason":"precondition_failed")", "P") +
          msg("2,3", 101, action_types::pool::acquire, "succeeded", R"(,"node":"node-000","joined":false)", "P") +
          msg("3,1", 101, action_types::provision::node, "started", R"(,"node":"local-a","pool_node":"node-000")", "P") +
          msg("3,2", 102, action_types::provision::node, "succeeded", "", "P") +
          msg("4,1", 102, action_types::agent::task, "started", R"(,"node":"local-a")", "P") +
          msg("4,2", 106, action_types::agent::task, "succeeded", R"(,"exit_code":0)", "P") +
          msg("5,1", 106, action_types::pool::release, "started", R"(,"node":"node-000","lease":"l1")", "P") +
          msg("5,2", 106.1, action_types::pool::release, "succeeded", "", "P") +
          msg("6", 106.2, action_types::run::job, "succeeded", "", "P"));
  const auto jobs = agent::pool::workload_from(s);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].tenant, "ann");
  EXPECT_EQ(jobs[0].slots, 1);
  EXPECT_EQ(jobs[0].duration, 4);
}

TEST(pool_workload, a_job_that_ran_no_task_held_no_slot) {
  temp_dir dir;
  const auto s = stats_of(dir, "none.jsonl",
                          msg("1", 10, action_types::run::job, "started") + msg("2", 12, action_types::run::job, "failed",
                                                                                 R"(,"exception":"x","reason":"y")"));
  EXPECT_TRUE(agent::pool::workload_from(s).empty());
}

struct pool_cli : ::testing::Test {
  temp_dir dir;
  test::process_options opts;
  void SetUp() override {
    test::use_home(opts, dir.path());
    opts.unset_env = {"FERRY_TASK_ID"};
  }
};

// ann at 0 and bob at 1, 10 s each, one node at most that boots in 45 s:
//   min 0: ann waits 45 (boot), bob until ann ends at 55: waits 54. One node from 0 until bob ends at 65
//          plus the 5 min idle timeout: 365 node-seconds.
//   min 1: ann waits 0, bob 9 (ann ends at 10). The minimum node from 0 to 20.
TEST_F(pool_cli, simulate_replays_the_traced_jobs_through_each_policy) {
  const auto traces = dir.write("day.jsonl", tenant_run("A", 5000, "ann", "n1", 10) + tenant_run("B", 5001, "bob", "n2", 10));
  const auto chart = dir.path() / "nodes.svg";
  // --poll 0s: a waiting job sees a freed slot at once (the default, pool.poll, would have bob read the
  // pool every 5 s from his arrival).
  const auto r = run_ferry({"pool", "simulate", traces.string(), "--min", "0,1", "--max", "1", "--idle", "5m", "--boot",
                            "45s", "--poll", "0s", "--chart", chart.string(), "--json"},
                           opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto v = boost::json::parse(r.out);
  EXPECT_EQ(v.at("jobs"), 2);
  EXPECT_EQ(v.at("tenants"), 2);
  const auto& cold = v.at("policies").at(0);
  EXPECT_EQ(cold.at("policy"), "min 0, idle 5m");
  EXPECT_EQ(cold.at("wait_p50").to_number<double>(), 45);
  EXPECT_EQ(cold.at("wait_max").to_number<double>(), 54);
  EXPECT_EQ(cold.at("wait_mean").to_number<double>(), 49.5);
  EXPECT_EQ(cold.at("node_seconds").to_number<double>(), 365);
  EXPECT_EQ(cold.at("tenants").at("bob").at("wait_max").to_number<double>(), 54);
  const auto& warm = v.at("policies").at(1);
  EXPECT_EQ(warm.at("wait_p50").to_number<double>(), 0);
  EXPECT_EQ(warm.at("wait_max").to_number<double>(), 9);
  EXPECT_EQ(warm.at("node_seconds").to_number<double>(), 20);
  EXPECT_DOUBLE_EQ(warm.at("utilisation").to_number<double>(), 1.0);

  std::ifstream in(chart);
  std::stringstream svg;
  svg << in.rdbuf();
  EXPECT_NE(svg.str().find("<svg"), std::string::npos);
  EXPECT_NE(svg.str().find("min 0, idle 5m"), std::string::npos);
  EXPECT_NE(svg.str().find("min 1, idle 5m"), std::string::npos);

  const auto text = run_ferry({"pool", "simulate", traces.string(), "--min", "0,1", "--max", "1", "--idle", "5m"}, opts);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("2 jobs of 2 tenants"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("min 1, idle 5m"), std::string::npos) << text.out;
}

TEST_F(pool_cli, simulate_refuses_a_policy_it_cannot_play_naming_the_option) {
  const auto traces = dir.write("day.jsonl", tenant_run("A", 5000, "ann", "n1", 10));
  const auto too_many = run_ferry({"pool", "simulate", traces.string(), "--min", "0,5", "--max", "2"}, opts);
  EXPECT_EQ(too_many.exit_code, 2);
  EXPECT_NE(too_many.err.find(agent::error_line("--min: '5' is not a node count from 0 to --max (2)")), std::string::npos)
      << too_many.err;
  const auto words = run_ferry({"pool", "simulate", traces.string(), "--min", "0,two"}, opts);
  EXPECT_EQ(words.exit_code, 2);
  EXPECT_NE(words.err.find("--min"), std::string::npos) << words.err;
  const auto idle = run_ferry({"pool", "simulate", traces.string(), "--idle", "soon"}, opts);
  EXPECT_EQ(idle.exit_code, 2);
  EXPECT_NE(idle.err.find("--idle: 'soon' is not a duration"), std::string::npos) << idle.err;
  const auto empty = dir.write("empty.jsonl", msg("1", 10, action_types::run::job, "started") +
                                                  msg("2", 11, action_types::run::job, "succeeded"));
  const auto none = run_ferry({"pool", "simulate", empty.string()}, opts);
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("nothing to replay"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace ferry
