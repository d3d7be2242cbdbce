// The newcomer's map: does ferry end when the work ends? A small project (a package, a script that reads a
// data file with yaml) packed with this machine's own python3, whose whole site-packages ships (about a
// hundred layers, none of which the tasks import but yaml). Each case gets a fresh storage prefix and no
// nodes; then, as the newcomer did:
//   ferry run --nodes 2 -- python3 task.py 1              stores every layer, leaves 2 warm nodes
//   ferry map --range 1..100 [--nodes N] -- python3 task.py {}
// The figure is the map's wall time against the moment its last task ended (the ferry:agent:task actions
// of its trace, on the same clock): what ferry made the user wait for beyond the work.
//   as typed      `ferry map --range 1..100`: as many nodes as ferry chooses
//   8 nodes       `--nodes 8`: 2 warm and 6 new, a fan-out (nodes.fanout_min is 4)
// FERRY_BENCH_FERRY names another ferry binary (its ferry-node beside it) to measure instead of this
// build's: the same cases before and after a change, on the same machine.
#include "bench/bench_support.hpp"
#include "bench/bench_world.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace fs = std::filesystem;
namespace json = boost::json;
using ferry::bench::quote;
using ferry::bench::shell;

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string chosen_binary() {
  const char* other = std::getenv("FERRY_BENCH_FERRY");
  return other && *other ? std::string(other) : ferry::bench::ferry_binary().string();
}

struct world : ferry::bench::node_world {
  fs::path project = dir / "project";
  int prefix = 0;

  explicit world(std::string binary) : node_world("map", chosen_binary()) { (void)binary; }

  void fresh() {
    std::system(fmt::format("{} -q nodes down --all > /dev/null 2>&1", quote(ferry)).c_str());
    shell("sync");
    ::setenv("FERRY_STORAGE_URL", fmt::format("s3://bench/map{}", ++prefix).c_str(), 1);
    fs::remove_all(dir / "XDG_CACHE_HOME" / "ferry");  // a cold hash cache, as on a newcomer's machine
  }
};

void make_project(world& w) {
  fs::create_directories(w.project / "stats");
  fs::create_directories(w.project / "data");
  std::ofstream(w.project / "stats" / "__init__.py") << "def scaled(x, k):\n    return x * k\n";
  std::ofstream(w.project / "data" / "config.yaml") << "scale: 3\n";
  std::ofstream(w.project / "task.py") << "import sys, yaml, stats\n"
                                          "cfg = yaml.safe_load(open('data/config.yaml'))\n"
                                          "print(stats.scaled(int(sys.argv[1]), cfg['scale']))\n";
}

// The end of the last ferry:agent:task action in the trace (unix seconds).
double last_task_end(const fs::path& trace) {
  std::map<std::string, bool> task_keys;
  double last = -1;
  std::ifstream in(trace);
  for (std::string line; std::getline(in, line);) {
    json::error_code ec;
    auto v = json::parse(line, ec);
    if (ec || !v.is_object()) continue;
    const auto& o = v.as_object();
    std::string key = std::string(o.at("task_uuid").as_string());
    const auto& level = o.at("task_level").as_array();
    for (std::size_t i = 0; i + 1 < level.size(); ++i) key += "/" + json::serialize(level[i]);
    const auto* status = o.if_contains("action_status");
    if (!status) continue;
    if (status->as_string() == "started") {
      if (o.at("action_type").as_string() == "ferry:agent:task") task_keys[key] = true;
    } else if (task_keys.count(key)) {
      last = std::max(last, o.at("timestamp").to_number<double>());
    }
  }
  return last;
}

struct outcome {
  double wall = 0, last_task = 0;
  std::string summary, startup;
};

outcome one_case(world& w, const std::string& nodes_flag, int round) {
  w.fresh();
  shell(fmt::format("cd {} && {} -q run --nodes 2 -- python3 task.py 1 > /dev/null", quote(w.project), quote(w.ferry)));
  const auto trace = w.dir / fmt::format("map-{}-{}.jsonl", nodes_flag.empty() ? "typed" : "8", round);
  const auto err = w.dir / "map.err";
  const double t0 = unix_now();
  shell(fmt::format("cd {} && {} --trace {} map --range 1..100 {} -- python3 task.py {{}} > /dev/null 2> {}",
                    quote(w.project), quote(w.ferry), quote(trace), nodes_flag, quote(err)));
  outcome o;
  o.wall = unix_now() - t0;
  o.last_task = last_task_end(trace) - t0;
  std::ifstream in(err);
  for (std::string line; std::getline(in, line);) {
    if (line.find("ferry: map: 100 tasks") == 0) o.summary = line;
    if (line.find("ferry: ready in") == 0) o.startup = line;
  }
  return o;
}

int run(world& w) {
  shell(fmt::format("{} -q nodes up 1 > /dev/null && {} -q nodes down --all > /dev/null", quote(w.ferry), quote(w.ferry)));
  w.start_moto();
  make_project(w);
  fmt::print("ferry: {}\n", w.ferry);
  fmt::print("{:<10} {:>9} {:>16} {:>16}\n", "case", "wall", "last task ended", "wall / last task");
  const int rounds = std::getenv("FERRY_BENCH_ROUNDS") ? std::atoi(std::getenv("FERRY_BENCH_ROUNDS")) : 1;
  for (const auto& [name, flag] : {std::pair<std::string, std::string>{"as typed", ""}, {"8 nodes", "--nodes 8"}}) {
    for (int r = 0; r < rounds; ++r) {
      const auto o = one_case(w, flag, r);
      fmt::print("{:<10} {:>7.2f} s {:>14.2f} s {:>15.2f}x\n", name, o.wall, o.last_task, o.wall / o.last_task);
      fmt::print("    {}\n    {}\n", o.summary, o.startup);
    }
  }
  return 0;
}

}  // namespace

int main() { return ferry::bench::bench_main<world>("bench_map", run); }
