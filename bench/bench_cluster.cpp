// `ferry cluster` (a Dask cluster on ferry's nodes) against `ferry map`, on 2 warm local nodes with the
// environment in place (`ferry warmup`), storage on moto_server:
//   first result: `ferry cluster run -- python3 first.py` from no cluster to a Client's first result,
//     best of FERRY_BENCH_ROUNDS (default 3), the cluster ended between rounds (the nodes stay warm);
//     goal under 3 s. Also `cluster up` alone, and the same program against the running cluster.
//   10,000 trivial tasks: `client.map` of a no-op over the cluster (the program's own clock from the first
//     submit to the last result, and the whole command) against `ferry map --range 1..10000 -- true` over the
//     same 2 nodes at 16 per node, side by side in one run.
// The project: a workspace with its own package and a venv holding distributed and what it imports (links into
// Debian's python3-distributed, as a venv with dask installed holds copies), so the nodes run Dask from the
// shipped layers.
#include "bench/bench_support.hpp"
#include "bench/bench_world.hpp"
#include "support/venv_closure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace fs = std::filesystem;
using ferry::bench::best_of;
using ferry::bench::first_line;
using ferry::bench::output_of;
using ferry::bench::quote;
using ferry::bench::seconds_since;
using ferry::bench::shell;
using ferry::bench::timed;

namespace {

constexpr int nodes = 2;
constexpr int tasks = 10000;

struct world : ferry::bench::node_world {
  fs::path project = dir / "project";

  explicit world(std::string binary) : node_world("cluster", std::move(binary)) {
    fs::create_directories(project);
    ::setenv("FERRY_STORAGE_URL", "s3://bench/p", 1);
  }
  ~world() { std::system(fmt::format("{} -q cluster down --all > /dev/null 2>&1", quote(ferry)).c_str()); }

  std::string in_project(const std::string& command) const {
    return fmt::format("cd {} && {}", quote(project), command);
  }
};

void make_project(world& w) {
  fs::create_directories(w.project / "wsmod");
  std::ofstream(w.project / "wsmod" / "__init__.py") << "def weight(x):\n    return x\n";
  std::ofstream(w.project / ".gitignore") << ".venv/\n";
  std::ofstream(w.project / "ferry.toml") << "[packaging]\npython = \".venv/bin/python\"\n";
  std::ofstream(w.project / "first.py") << "from distributed import Client\n"
                                            "c = Client(timeout=60)\n"
                                            "print('first', c.submit(lambda: 1).result(), flush=True)\n";
  std::ofstream(w.project / "many.py") << "import sys, time\n"
                                           "from distributed import Client\n"
                                           "def task(x):\n"
                                           "    return x\n"
                                           "c = Client(timeout=60)\n"
                                           "n = int(sys.argv[1])\n"
                                           "start = time.monotonic()\n"
                                           "total = sum(c.gather(c.map(task, range(n), pure=False)))\n"
                                           "print('seconds %.3f' % (time.monotonic() - start), flush=True)\n"
                                           "assert total == n * (n - 1) // 2\n";
  shell(fmt::format("/usr/bin/python3 -m venv --without-pip {}", quote(w.project / ".venv")));
  const auto site = first_line(output_of(fmt::format("{} -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'",
                                                     quote(w.project / ".venv" / "bin" / "python"))));
  std::ofstream(w.dir / "closure.py") << ferry::test::dask_closure_script;
  const auto names = output_of(fmt::format("/usr/bin/python3 {}", quote(w.dir / "closure.py")));
  if (ferry::test::link_closure(names, site) < 5) throw std::runtime_error("no distributed to link: " + names);
}

int run(world& w) {
  make_project(w);
  // The first node makes the bridge that moto listens on.
  shell(fmt::format("{} -q nodes up 1 > /dev/null && {} -q nodes down --all > /dev/null", quote(w.ferry),
                    quote(w.ferry)));
  w.start_moto();
  shell(fmt::format("{} -q nodes up {} > /dev/null", quote(w.ferry), nodes));
  shell(w.in_project(fmt::format("{} -q warmup --nodes {} > /dev/null", quote(w.ferry), nodes)));

  const int rounds = std::getenv("FERRY_BENCH_ROUNDS") ? std::max(1, std::atoi(std::getenv("FERRY_BENCH_ROUNDS"))) : 3;
  const auto down = fmt::format("{} -q cluster down --all > /dev/null", quote(w.ferry));
  // From no cluster to the first result; the cluster is ended after each round, outside the clock.
  double first = 1e9, up_alone = 1e9, down_time = 1e9;
  for (int i = 0; i < rounds; ++i) {
    first = std::min(first, timed(w.in_project(fmt::format(
                                "{} -q cluster run --nodes {} -- /usr/bin/python3 first.py > /dev/null", quote(w.ferry), nodes))));
    down_time = std::min(down_time, timed(down));
    up_alone = std::min(up_alone, timed(w.in_project(fmt::format("{} -q cluster up --nodes {} > /dev/null",
                                                                  quote(w.ferry), nodes))));
    shell(down);
  }
  shell(w.in_project(fmt::format("{} -q cluster up --nodes {} > /dev/null", quote(w.ferry), nodes)));
  const double first_running = best_of(rounds, [&] {
    shell(w.in_project(fmt::format("{} -q cluster run -- /usr/bin/python3 first.py > /dev/null", quote(w.ferry))));
  });

  // 10,000 trivial tasks each way, on the same nodes, the cluster running.
  std::string many_out;
  const double cluster_wall = timed(
      w.in_project(fmt::format("{} -q cluster run -- /usr/bin/python3 many.py {}", quote(w.ferry), tasks)), &many_out);
  const auto at = many_out.find("seconds ");
  if (at == std::string::npos) throw std::runtime_error("many.py said: " + many_out);
  const double cluster_inner = std::stod(many_out.substr(at + 8));
  shell(down);
  const double map_wall = timed(w.in_project(fmt::format(
      "{} -q map --range 1..{} --nodes {} --concurrency 16 -- true > /dev/null", quote(w.ferry), tasks, nodes)));

  fmt::print("ferry cluster on {} warm local nodes (environment in place), best of {}\n", nodes, rounds);
  fmt::print("  no cluster -> first result (cluster run -- first.py)  {:6.2f} s (goal < 3 s)\n", first);
  fmt::print("  cluster up alone                                      {:6.2f} s\n", up_alone);
  fmt::print("  cluster down (scheduler, workers and holder stopped)   {:6.2f} s\n", down_time);
  fmt::print("  first result, cluster running                         {:6.2f} s\n", first_running);
  fmt::print("{} trivial tasks on the same {} nodes\n", tasks, nodes);
  fmt::print("  client.map over the cluster: {:6.2f} s in the program ({:6.0f} tasks/s), {:6.2f} s the whole command\n",
             cluster_inner, tasks / cluster_inner, cluster_wall);
  fmt::print("  ferry map --concurrency 16:  {:6.2f} s ({:6.0f} tasks/s)\n", map_wall, tasks / map_wall);
  return 0;
}

}  // namespace

int main() { return ferry::bench::bench_main<world>("bench_cluster", run); }
