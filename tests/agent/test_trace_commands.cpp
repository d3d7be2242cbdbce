// `ferry trace stats` and `ferry trace html` as a user runs them.
#include "agent/cli/report.hpp"
#include "support/process.hpp"
#include "support/sample_traces.hpp"
#include "support/synthetic_runs.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include <boost/json/parse.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

namespace ferry {
namespace {

using test::run_ferry;
using test::temp_dir;

struct trace_cli : ::testing::Test {
  temp_dir dir;
  test::process_options opts;

  void SetUp() override {
    test::use_home(opts, dir.path());
    opts.unset_env = {"FERRY_TASK_ID"};
  }
};

TEST_F(trace_cli, stats_prints_a_report_and_json) {
  const auto file = dir.write("map.jsonl", test::map_trace());
  const auto text = run_ferry({"trace", "stats", file.string()}, opts);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const std::vector<std::string> expected_parts = {"1 files, 22 messages, 1 eliot tasks, 1 runs and maps",
                                                   std::string(action_types::agent::task), "65.7%", "34.3%",
                                                   fmt::format("{} node=n1", action_types::readiness::wait_ssh)};
  for (const auto& expected : expected_parts)
    EXPECT_NE(text.out.find(expected), std::string::npos) << expected << " in:\n" << text.out;

  const auto json = run_ferry({"trace", "stats", file.string(), "--json"}, opts);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto v = boost::json::parse(json.out);
  const auto& job = v.at("jobs").at(0);
  EXPECT_EQ(job.at("utilisation").at("busy_node_seconds").to_number<double>(), 23);
  EXPECT_EQ(job.at("utilisation").at("provisioned_node_seconds").to_number<double>(), 35);
  EXPECT_EQ(job.at("pending").at("p50").to_number<double>(), 6);
  EXPECT_EQ(job.at("pending").at("within_5s").to_number<double>(), 0.25);
  EXPECT_EQ(job.at("critical_path").as_array().size(), 6u);
  EXPECT_EQ(v.at("pending").at("count"), 4);
}

TEST_F(trace_cli, stats_names_malformed_lines_and_uses_the_rest) {
  auto text = test::map_trace();
  text.insert(text.find('\n') + 1, "{\"task_uuid\": oops\n");  // line 2
  const auto file = dir.write("broken.jsonl", text);
  const auto r = run_ferry({"trace", "stats", file.string(), "--json"}, opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(agent::error_line(fmt::format("{}:2: not JSON", file.string()))), std::string::npos) << r.err;
  const auto v = boost::json::parse(r.out);
  EXPECT_EQ(v.at("problems").as_array().size(), 1u);
  EXPECT_EQ(v.at("jobs").at(0).at("tasks"), 4);
}

TEST_F(trace_cli, stats_over_a_thousand_run_traces_in_a_directory) {
  constexpr std::size_t runs = 1000;
  for (std::size_t i = 0; i < runs; ++i) dir.write(fmt::format("runs/{:04}.jsonl", i), test::synthetic_run(i));
  const auto r = run_ferry({"trace", "stats", (dir / "runs").string(), "--json"}, opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto v = boost::json::parse(r.out);
  EXPECT_EQ(v.at("files"), runs);
  EXPECT_EQ(v.at("messages"), runs * 12);
  EXPECT_EQ(v.at("jobs").as_array().size(), runs);
  EXPECT_EQ(v.at("utilisation").at("busy_node_seconds").to_number<double>(), 3000);
  EXPECT_EQ(v.at("utilisation").at("provisioned_node_seconds").to_number<double>(), 9500);
  EXPECT_EQ(v.at("pending").at("within_2s").to_number<double>(), 0.75);
  for (const auto& t : v.at("action_types").as_array())
    if (t.at("action_type").as_string() == action_types::agent::task) {
      EXPECT_EQ(t.at("count"), runs);
      EXPECT_EQ(t.at("failures"), 10);
      EXPECT_EQ(t.at("duration").at("p50").to_number<double>(), 3);
    }
  double total = 0;
  for (const auto& job : v.at("jobs").as_array())
    for (const auto& link : job.at("critical_path").as_array()) total += link.at("duration").to_number<double>();
  EXPECT_EQ(total, 10.0 * runs);
}

TEST_F(trace_cli, html_writes_one_self_contained_file) {
  const auto file = dir.write("map.jsonl", test::map_trace());
  const auto out = dir / "timeline.html";
  const auto r = run_ferry({"trace", "html", file.string(), "-o", out.string()}, opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto html = test::read_file(out);
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(html.find(R"(id="ferry-data")"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "a temporary was left: " << e.path();
}

TEST_F(trace_cli, help_and_usage_errors) {
  for (auto cmd : {"stats", "html"}) {
    const auto help = run_ferry({"trace", cmd, "--help"}, opts);
    EXPECT_EQ(help.exit_code, 0) << cmd;
    EXPECT_NE(help.out.find("Usage"), std::string::npos) << help.out;
    const auto bare = run_ferry({"trace", cmd, "--no-such-option"}, opts);
    EXPECT_EQ(bare.exit_code, 2) << cmd << bare.err;
  }
  // No file and no command's trace yet: the views' own traces are never read.
  const auto bare = run_ferry({"trace", "stats"}, opts);
  EXPECT_EQ(bare.exit_code, 1) << bare.err;
  EXPECT_NE(bare.err.find("no command's trace in"), std::string::npos) << bare.err;
  const auto missing = run_ferry({"trace", "stats", (dir / "nope.jsonl").string()}, opts);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("cannot read trace file"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace ferry
