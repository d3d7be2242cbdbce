// `ferry pool simulate` against a real run: the same workload, run for real by tenants on a pool of local
// nodes and replayed by the simulator with the pool's policy (its boot the one the traces measured, its
// poll the pool's), agrees on the mean wait for a slot and the node-hours that `ferry pool stats` reads
// from the traces of the run.
//
// The mean wait, not the median: on ten jobs the median is one job's wait, and which of the waiting jobs
// gets a freed slot is the one whose read of the pool comes first, a matter of the phase of each job's
// polls (a second apart, drifting by each read's latency), which a real run draws by chance and the
// simulator by rule. The sum of the waits does not depend on who wins. Both figures are printed.
//
// The policy: one slot per node, at most 2 nodes, no warm minimum, so that jobs wait both for nodes to boot
// and for slots to free. Its idle timeout (10 s) is longer than any stretch a node of this workload stays
// idle while jobs still come, so no node stops during the work: a node that stopped would leave its record
// behind, and the next acquire would lease it, fail to log in and drop it, a wait the simulator does not
// model. It is short enough that the nodes do stop after the work, within the test: the test then closes
// the traces' window with a `pool ls` after the timeout, so that `pool stats` counts each node until it
// stopped itself, as the simulator does (its last lease's end plus the timeout), and not until the last
// job's end.
#include "tracing/action_types.hpp"

#include "pool_tenants.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

namespace ferry::test::pool_day_tests {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

// One job of the workload: who runs it, when (seconds after the first), and how long its task sleeps.
struct day_job {
  int tenant;
  double at;
  double seconds;
};

// Ten jobs of three tenants over 13 s, 29 s of tasks on two slots: most of them wait for a slot.
constexpr day_job workload[] = {{0, 0.0, 4}, {1, 0.0, 4}, {2, 0.5, 3}, {0, 2.0, 2}, {1, 5.0, 3},
                                {2, 6.0, 2}, {0, 9.0, 4}, {1, 10.0, 2}, {2, 12.0, 3}, {0, 13.0, 2}};

constexpr const char* idle_timeout = "10s";
constexpr const char* poll = "1s";  // the least pool.poll: a waiting job reads the pool every second
constexpr double idle_seconds = 10;

// Within 20% of the larger, or within `floor` (what a figure near zero may differ by: a wait of a few
// tenths of a second is a read and a write of a record, not anything the policy decides; half a poll is
// the grain of a wait for a slot).
void expect_close(double real, double simulated, double floor, const std::string& what) {
  const double allowed = std::max(0.2 * std::max(real, simulated), floor);
  EXPECT_LE(std::abs(real - simulated), allowed) << what << ": real " << real << ", simulated " << simulated;
}

double number(const json::value& v) { return v.to_number<double>(); }

class pool_day : public pool_tenants {
 protected:
  // A venv each, as a tenant's project has (the same environment: its layers are shared on the nodes).
  void make_project(const tenant& t) override {
    write_file(t.project() / "main.py", "import sys, time\ntime.sleep(float(sys.argv[1]))\nprint('done')\n");
    write_file(t.project() / ".gitignore", ".venv/\n");
    std::string why;
    ASSERT_FALSE(make_venv(t.project() / ".venv", why).empty()) << why;
    write_file(t.project() / "ferry.toml", "[packaging]\npython = \".venv/bin/python\"\n");
  }

  process_options tenant_env(const tenant& t) const {
    auto o = pool_env(t);
    o.env["FERRY_POOL_MAX_NODES"] = "2";
    o.env["FERRY_POOL_MIN_NODES"] = "0";
    o.env["FERRY_POOL_NODE_SLOTS"] = "1";
    o.env["FERRY_POOL_IDLE_TIMEOUT"] = idle_timeout;
    o.env["FERRY_POOL_MAX_WAIT"] = "5m";
    o.env["FERRY_POOL_POLL"] = poll;
    return o;
  }

  // What a node took to join the pool, from the traces: the mean of the acquires that made their node
  // (made, booted and registered inside them), which is what a job waits for a new node.
  static double measured_boot(const fs::path& dir) {
    std::map<std::string, double> started;
    double sum = 0;
    int count = 0;
    for (const auto& e : fs::directory_iterator(dir))
      for (const auto& o : trace_file_lines(e.path())) {
        if (trace_type(o) != action_types::pool::acquire) continue;
        const auto status = trace_text(o, "action_status");
        if (status == "started") started[trace_action_key(o)] = number(o.at("timestamp"));
        if (status == "succeeded" && o.at("joined").as_bool()) {
          sum += number(o.at("timestamp")) - started.at(trace_action_key(o));
          ++count;
        }
      }
    EXPECT_GE(count, 1) << "no acquire made a node";
    return count > 0 ? sum / count : 0;
  }

  // The latest end of a release in the traces: when the last lease was given back.
  static double last_release(const fs::path& dir) {
    double last = 0;
    for (const auto& e : fs::directory_iterator(dir))
      for (const auto& o : trace_file_lines(e.path()))
        if (trace_type(o) == action_types::pool::release && trace_text(o, "action_status") == "succeeded")
          last = std::max(last, number(o.at("timestamp")));
    return last;
  }

  temp_dir traces_;
};

TEST_F(pool_day, the_simulator_replaying_a_real_runs_traces_agrees_with_what_the_pool_did) {
  // The day, for real: each job started at its offset, in its tenant's own HOME.
  std::vector<std::unique_ptr<child>> jobs;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < std::size(workload); ++i) {
    const auto& j = workload[i];
    std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              std::chrono::duration<double>(j.at)));
    const auto trace = traces_.path() / fmt::format("job{}.jsonl", i);
    jobs.push_back(spawn_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py", fmt::format("{}", j.seconds)},
                               tenant_env(tenants_[j.tenant])));
  }
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto r = jobs[i]->wait();
    ASSERT_EQ(r.exit_code, 0) << "job " << i << ": " << r.out << r.err;
  }
  // The nodes stop themselves once idle for the timeout: the traces' window closes after that.
  const double stops = last_release(traces_.path()) + idle_seconds + 1;
  while (std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() < stops)
    std::this_thread::sleep_for(200ms);
  const auto ls = run_ferry({"--trace", (traces_.path() / "after.jsonl").string(), "pool", "ls", "team"},
                            tenant_env(tenants_[0]));
  ASSERT_EQ(ls.exit_code, 0) << ls.err;

  const auto env = tenant_env(tenants_[0]);
  const auto stats = run_ferry({"pool", "stats", traces_.path().string(), "--slots", "1", "--idle", idle_timeout, "--json"}, env);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const auto boot = measured_boot(traces_.path());
  const auto sim = run_ferry({"pool", "simulate", traces_.path().string(), "--min", "0", "--max", "2", "--capacity", "1",
                              "--idle", idle_timeout, "--boot", fmt::format("{}ms", std::lround(boot * 1000)),
                              "--poll", poll, "--json"},
                             env);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const auto real = json::parse(stats.out).at("pool").as_object();
  const auto simulated = json::parse(sim.out).at("policies").as_array().at(0).as_object();
  const std::string both = "\nstats: " + stats.out + "simulate: " + sim.out + fmt::format("boot: {:.2f} s", boot);
  ASSERT_EQ(json::parse(sim.out).at("jobs").to_number<std::size_t>(), std::size(workload)) << both;
  ASSERT_EQ(real.at("acquires").to_number<std::size_t>(), std::size(workload)) << both;
  expect_close(number(real.at("wait_mean")), number(simulated.at("wait_mean")), 0.5, "mean wait" + both);
  expect_close(number(real.at("node_seconds")), number(simulated.at("node_seconds")), 1.0, "node-seconds" + both);
  std::printf("%s\n", both.c_str());
}

}  // namespace
}  // namespace ferry::test::pool_day_tests
