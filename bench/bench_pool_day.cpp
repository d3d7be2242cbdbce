// A team's day on one pool, scaled to minutes: users (tenants, each its own HOME: config, key, state and
// cache) arrive at random over the day, each with a `ferry map` of a random number of tasks that sleep a
// random few seconds, against one pool of local nodes (sshd in network namespaces) whose records live in a
// moto_server that answers one request at a time (moto checks If-Match and stores without a lock). The
// day runs once per warm minimum, the same arrivals each time (a fixed seed). For each: what the pool did
// (`ferry pool stats` over the day's traces: utilisation, waits for a slot, node-hours) beside what the
// simulator predicts for every minimum from the same traces (`ferry pool simulate`, with the boot the
// traces measured).
//
//   FERRY_BENCH_DAY_MINUTES  the day's length, arrivals spread over it          (default 10)
//   FERRY_BENCH_DAY_USERS    tenants, one map each                              (default 20)
//   FERRY_BENCH_DAY_MAX      pool.max_nodes                                     (default 4)
//   FERRY_BENCH_DAY_MINS     the warm minimums to run the day with, a comma list (default 0,2)
//   FERRY_BENCH_DAY_IDLE     pool.idle_timeout                                  (default 1m)
//   FERRY_BENCH_DAY_SEED     the arrivals' and sizes' seed                      (default 36)
//   FERRY_BENCH_DAY_TASKS    a map's tasks, at most (at least 1)                (default 8)
//   FERRY_BENCH_DAY_SLEEP    a task's sleep in seconds, at most (at least 2)    (default 15)
//   FERRY_BENCH_DAY_TRACES   where the days' traces stay, a directory per minimum
//                            (default /tmp/ferry-bench-pool-day-PID)
//
// Runs as root (local nodes), beside nothing else that makes local nodes.
#include "bench/bench_support.hpp"
#include "config/units.hpp"
#include "tracing/action_types.hpp"

#include "agent/local_run.hpp"
#include "provision/local_node_guard.hpp"
#include "support/local_nodes.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

namespace ferry::bench {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using test::process_options;

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

int env_int(const char* name, int fallback) { return std::stoi(env_or(name, std::to_string(fallback).c_str())); }

double number(const json::value& v) { return v.to_number<double>(); }

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct day_settings {
  double minutes = 10;
  int users = 20;
  int max_nodes = 4;
  std::vector<int> mins{0, 2};
  std::string idle = "1m";
  double idle_seconds = 60;
  unsigned seed = 36;
  int max_tasks = 8;
  int max_sleep = 15;

  static day_settings from_env() {
    day_settings s;
    s.minutes = std::stod(env_or("FERRY_BENCH_DAY_MINUTES", "10"));
    s.users = env_int("FERRY_BENCH_DAY_USERS", 20);
    s.max_nodes = env_int("FERRY_BENCH_DAY_MAX", 4);
    s.mins.clear();
    std::stringstream mins(env_or("FERRY_BENCH_DAY_MINS", "0,2"));
    for (std::string m; std::getline(mins, m, ',');) s.mins.push_back(std::stoi(m));
    s.idle = env_or("FERRY_BENCH_DAY_IDLE", "1m");
    const auto idle = config::parse_duration(s.idle);
    if (!idle) throw std::runtime_error("FERRY_BENCH_DAY_IDLE: not a duration: " + s.idle);
    s.idle_seconds = std::chrono::duration<double>(*idle).count();
    s.seed = static_cast<unsigned>(env_int("FERRY_BENCH_DAY_SEED", 36));
    s.max_tasks = std::max(1, env_int("FERRY_BENCH_DAY_TASKS", 8));
    s.max_sleep = std::max(2, env_int("FERRY_BENCH_DAY_SLEEP", 15));
    return s;
  }
};

// One user's map: when it starts (seconds into the day), the slots it asks for, its tasks' sleeps.
struct user_job {
  double at = 0;
  int nodes = 1;
  std::vector<int> sleeps;
};

std::vector<user_job> plan_day(const day_settings& s) {
  std::mt19937 rng(s.seed);
  std::uniform_real_distribution<double> arrival(0, s.minutes * 60);
  std::uniform_int_distribution<int> tasks(1, s.max_tasks), sleep(2, s.max_sleep), nodes(1, 2);
  std::vector<user_job> out(static_cast<std::size_t>(s.users));
  for (auto& j : out) {
    j.at = arrival(rng);
    j.sleeps.resize(static_cast<std::size_t>(tasks(rng)));
    for (auto& t : j.sleeps) t = sleep(rng);
    j.nodes = std::min<int>(nodes(rng), static_cast<int>(j.sleeps.size()));
  }
  return out;
}

struct user {
  std::string name;
  std::unique_ptr<test::temp_dir> home;
  std::unique_ptr<test::local_node_guard> guard;       // its own nodes (none: it runs on the pool)
  std::unique_ptr<test::local_node_guard> pool_guard;  // the nodes its agent made for the pool
  fs::path project() const { return home->path() / "project"; }
};

class pool_day {
 public:
  explicit pool_day(day_settings s) : s_(std::move(s)) {}

  int run() {
    if (!test::bridge_up()) throw std::runtime_error("the ferry0 bridge did not come up");
    moto_.emplace(test::moto_options{.host = std::string(provision::local::bridge_address), .serial = true});
    moto_->make_bucket("team");
    for (int i = 0; i < s_.users; ++i) make_user(fmt::format("user{:02}", i));
    const auto jobs = plan_day(s_);
    double slot_seconds = 0;
    for (const auto& j : jobs)
      for (int t : j.sleeps) slot_seconds += t;
    fmt::print("day: {} users over {} min, {} tasks of {:.0f} s in all, pool of at most {} nodes (1 slot each), "
               "idle timeout {}, seed {}\n",
               s_.users, s_.minutes, std::accumulate(jobs.begin(), jobs.end(), std::size_t{0},
                                                     [](std::size_t n, const user_job& j) { return n + j.sleeps.size(); }),
               slot_seconds, s_.max_nodes, s_.idle, s_.seed);
    std::fflush(stdout);
    for (const int min_nodes : s_.mins) run_day(jobs, min_nodes);
    for (auto& u : users_) {
      u.guard->cleanup();
      u.pool_guard->cleanup();
    }
    return 0;
  }

 private:
  void make_user(const std::string& name) {
    user u{name, std::make_unique<test::temp_dir>(), nullptr, nullptr};
    u.guard = std::make_unique<test::local_node_guard>(u.home->path() / "state" / "ferry" / "local");
    u.pool_guard = std::make_unique<test::local_node_guard>(u.home->path() / "state" / "ferry" / "pool" / "local");
    test::write_file(u.project() / "task.py", "import sys, time\ntime.sleep(float(sys.argv[1]))\nprint(sys.argv[1])\n");
    test::write_file(u.project() / ".gitignore", ".venv/\n");
    std::string why;
    if (test::make_venv(u.project() / ".venv", why).empty()) throw std::runtime_error(why);
    test::write_file(u.project() / "ferry.toml", "[packaging]\npython = \".venv/bin/python\"\n");
    users_.push_back(std::move(u));
  }

  process_options env(const user& u, const std::string& pool, int min_nodes) const {
    auto o = test::local_ferry_env(*moto_, u.home->path(), "s3://team/p", u.project());
    o.env["FERRY_POOL_NAME"] = pool;
    o.env["FERRY_POOL_TENANT"] = u.name;
    o.env["FERRY_POOL_MAX_NODES"] = std::to_string(s_.max_nodes);
    o.env["FERRY_POOL_MIN_NODES"] = std::to_string(min_nodes);
    o.env["FERRY_POOL_NODE_SLOTS"] = "1";
    o.env["FERRY_POOL_IDLE_TIMEOUT"] = s_.idle;
    o.env["FERRY_POOL_MAX_WAIT"] = "30m";
    o.env["FERRY_POOL_POLL"] = "2s";
    return o;
  }

  // The warm minimum up before the day: as many one-second jobs at once, on a pool that keeps the first
  // min_nodes nodes it makes. Their traces are not the day's.
  void warm_up(const std::string& pool, int min_nodes) {
    std::vector<std::thread> threads;
    for (int i = 0; i < min_nodes; ++i)
      threads.emplace_back([&, i] {
        const auto& u = users_[static_cast<std::size_t>(i) % users_.size()];
        const auto r = test::run_ferry({"run", "--", "python3", "task.py", "1"}, env(u, pool, min_nodes));
        if (r.exit_code != 0) std::fprintf(stderr, "warm-up job: %s\n", r.err.c_str());
      });
    for (auto& t : threads) t.join();
  }

  void run_day(const std::vector<user_job>& jobs, int min_nodes) {
    const auto pool = fmt::format("day-min{}", min_nodes);
    const auto traces = traces_root_ / pool;
    fs::create_directories(traces);
    warm_up(pool, min_nodes);
    fmt::print("\n== pool.min_nodes {} (pool {}; traces in {}) ==\n", min_nodes, pool, traces.string());
    std::fflush(stdout);
    std::vector<std::thread> threads;
    std::vector<int> exits(jobs.size(), -1);
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const auto& j = jobs[i];
      const auto& u = users_[i % users_.size()];
      std::string inputs;
      for (int t : j.sleeps) inputs += std::to_string(t) + "\n";
      const auto inputs_file = u.home->path() / fmt::format("{}.inputs", pool);
      test::write_file(inputs_file, inputs);
      std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                std::chrono::duration<double>(j.at)));
      const std::vector<std::string> args = {"--trace", (traces / fmt::format("{}.jsonl", u.name)).string(), "map",
                                             "--nodes", std::to_string(j.nodes), "--concurrency", "1", "--inputs",
                                             inputs_file.string(), "--", "python3", "task.py", "{}"};
      threads.emplace_back([this, args, &u, &exits, i, pool, min_nodes] {
        exits[i] = test::run_ferry(args, env(u, pool, min_nodes)).exit_code;
      });
    }
    for (auto& t : threads) t.join();
    const double day = seconds_since(start);
    int failed = 0;
    for (int e : exits) failed += e != 0;
    // Nodes beyond the minimum stop once idle for the timeout: the traces' window closes after that, so
    // that `pool stats` counts them until they stopped, as the simulator does.
    const double stops = last_release(traces) + s_.idle_seconds + 2;
    while (wall_now() < stops) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const auto& first = users_.front();
    (void)test::run_ferry({"--trace", (traces / "after.jsonl").string(), "pool", "ls", pool}, env(first, pool, min_nodes));
    report(traces, pool, min_nodes, day, failed);
  }

  // The latest end of a release in the traces: when the last lease was given back.
  static double last_release(const fs::path& dir) {
    double last = 0;
    for (const auto& e : fs::directory_iterator(dir))
      for (const auto& o : test::trace_file_lines(e.path()))
        if (test::trace_type(o) == action_types::pool::release && test::trace_text(o, "action_status") == "succeeded")
          last = std::max(last, number(o.at("timestamp")));
    return last;
  }

  // What a node took to join the pool: the mean of the acquires that made their node; 0 without one.
  static double measured_boot(const fs::path& dir, int& count) {
    std::map<std::string, double> started;
    double sum = 0;
    count = 0;
    for (const auto& e : fs::directory_iterator(dir))
      for (const auto& o : test::trace_file_lines(e.path())) {
        if (test::trace_type(o) != action_types::pool::acquire) continue;
        const auto status = test::trace_text(o, "action_status");
        if (status == "started") started[test::trace_action_key(o)] = number(o.at("timestamp"));
        if (status == "succeeded" && o.at("joined").as_bool()) {
          sum += number(o.at("timestamp")) - started.at(test::trace_action_key(o));
          ++count;
        }
      }
    return count > 0 ? sum / count : 0;
  }

  void report(const fs::path& traces, const std::string& pool, int min_nodes, double day, int failed) {
    const auto& first = users_.front();
    const auto o = env(first, pool, min_nodes);
    const auto stats = test::run_ferry({"pool", "stats", traces.string(), "--slots", "1", "--idle", s_.idle}, o);
    const auto stats_json =
        test::run_ferry({"pool", "stats", traces.string(), "--slots", "1", "--idle", s_.idle, "--json"}, o);
    int joined = 0;
    double boot = measured_boot(traces, joined);
    // No node made during the day (the minimum took everything): the other day's boot, else the default.
    if (joined == 0) boot = last_boot_;
    if (joined > 0) last_boot_ = boot;
    std::string mins;
    for (int m : s_.mins) mins += (mins.empty() ? "" : ",") + std::to_string(m);
    const std::vector<std::string> sim_args = {"pool", "simulate", traces.string(), "--min", mins, "--max",
                                               std::to_string(s_.max_nodes), "--idle", s_.idle, "--boot",
                                               fmt::format("{}ms", std::lround(boot * 1000)), "--capacity", "1"};
    const auto sim = test::run_ferry(sim_args, o);
    auto sim_json_args = sim_args;
    sim_json_args.push_back("--json");
    const auto sim_json = test::run_ferry(sim_json_args, o);
    fmt::print("the day took {:.1f} min; {} of {} maps failed; boot measured {:.2f} s over {} nodes made\n", day / 60,
               failed, users_.size(), boot, joined);
    fmt::print("ferry pool stats {} --slots 1 --idle {}\n{}{}", traces.string(), s_.idle, stats.out, stats.err);
    fmt::print("ferry pool simulate {} --min {} --max {} --idle {} --boot {}ms --capacity 1\n{}{}", traces.string(), mins,
               s_.max_nodes, s_.idle, std::lround(boot * 1000), sim.out, sim.err);
    if (stats_json.exit_code == 0 && sim_json.exit_code == 0) {
      const auto real = json::parse(stats_json.out).at("pool").as_object();
      fmt::print("side by side (real: min {}):\n{:<24} {:>9} {:>9} {:>11} {:>12}\n", min_nodes, "", "wait p50",
                 "wait p95", "node-hours", "utilisation");
      fmt::print("{:<24} {:>7.1f} s {:>7.1f} s {:>11.3f} {:>11.1f}%\n", fmt::format("real, min {}", min_nodes),
                 number(real.at("wait_p50")), number(real.at("wait_p95")), number(real.at("node_seconds")) / 3600,
                 100 * number(real.at("utilisation")));
      const auto simulated = json::parse(sim_json.out);
      for (const auto& p : simulated.at("policies").as_array()) {
        const auto& q = p.as_object();
        fmt::print("{:<24} {:>7.1f} s {:>7.1f} s {:>11.3f} {:>11.1f}%\n",
                   fmt::format("simulated, min {}", number(q.at("min_nodes"))), number(q.at("wait_p50")),
                   number(q.at("wait_p95")), number(q.at("node_seconds")) / 3600, 100 * number(q.at("utilisation")));
      }
    }
    std::fflush(stdout);
  }

  day_settings s_;
  std::optional<test::moto_server> moto_;
  std::vector<user> users_;
  // Kept after the bench: `ferry pool stats` and `simulate` read them again with other options.
  fs::path traces_root_{env_or("FERRY_BENCH_DAY_TRACES", fmt::format("/tmp/ferry-bench-pool-day-{}", ::getpid()).c_str())};
  double last_boot_ = 45;
};

}  // namespace
}  // namespace ferry::bench

int main() {
  try {
    ferry::bench::pool_day day(ferry::bench::day_settings::from_env());
    return day.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pool_day: %s\n", e.what());
    return 1;
  }
}
