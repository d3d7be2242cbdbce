// `ferry run` and `ferry map` on local nodes, side by side with the peers, in one run:
//   cold start: fresh nodes, empty storage prefix and an empty hash cache; its start-up breakdown, and
//     the overlap: ready <= 1.15 x (the longer of `ferry pack` alone and `ferry nodes up` alone, plus
//     the environment set-up the run itself reports);
//   a warm `ferry run -- true` (environment cached, node warm) vs `ssh node true`: goal <= 2x;
//   a 20-task `ferry map -- true` over 4 warm nodes: goal under 0.5 s.
// The project: a workspace with its own package, and a venv holding copies of real packages from this
// machine's site-packages (botocore, boto3, s3transfer, urllib3, jmespath, dateutil, yaml: about 38 MB).
// moto_server is the storage, on the bridge address where nodes reach it.
#include "bench/bench_support.hpp"
#include "bench/bench_world.hpp"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using ferry::bench::best_of;
using ferry::bench::field;
using ferry::bench::output_of;
using ferry::bench::quote;
using ferry::bench::shell;

namespace {

constexpr int warm_nodes = 4;

struct world : ferry::bench::node_world {
  fs::path project = dir / "project";
  int prefix = 0;

  explicit world(std::string binary) : node_world("run", std::move(binary)) {
    fs::create_directories(project);
    ::setenv("FERRY_NODES_MAX_NODES", "8", 1);
  }

  std::string ferry_in_project(const std::string& args) const {
    return fmt::format("cd {} && {} {}", quote(project), quote(ferry), args);
  }
  // A storage prefix nobody used: storage holds nothing of the project there.
  void fresh_storage() { ::setenv("FERRY_STORAGE_URL", fmt::format("s3://bench/p{}", ++prefix).c_str(), 1); }
  void cold_hash_cache() const {
    for (const char* f : {"hashes.bin", "zip-digests", "discovery.json"}) fs::remove(dir / "XDG_CACHE_HOME" / "ferry" / f);
  }
};

void make_project(world& w) {
  fs::create_directories(w.project / "app");
  std::ofstream(w.project / "app" / "__init__.py") << "VALUE = 1\n";
  std::ofstream(w.project / "main.py") << "import app, botocore\nprint(app.VALUE, botocore.__version__)\n";
  std::ofstream(w.project / ".gitignore") << ".venv/\n";
  std::ofstream(w.project / "ferry.toml") << "[packaging]\npython = \".venv/bin/python\"\n";
  shell(fmt::format("/usr/bin/python3 -m venv --without-pip {}", quote(w.project / ".venv")));
  const auto site = output_of(fmt::format("{} -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'",
                                          quote(w.project / ".venv" / "bin" / "python")));
  const auto source = output_of("python3 -c 'import botocore, os; print(os.path.dirname(os.path.dirname(botocore.__file__)))'");
  for (const char* pkg : {"botocore", "boto3", "s3transfer", "urllib3", "jmespath", "dateutil", "yaml"}) {
    shell(fmt::format("cp -r {}/{} {}/", source.substr(0, source.find('\n')), pkg, site.substr(0, site.find('\n'))));
  }
}

int run(world& w) {
  make_project(w);
  // The first node makes the bridge that moto listens on.
  shell(fmt::format("{} -q nodes up 1 > /dev/null && {} -q nodes down --all > /dev/null", quote(w.ferry),
                    quote(w.ferry)));
  w.start_moto();

  // Each part of a cold start alone.
  const double nodes_alone = best_of(2, [&] {
    shell(fmt::format("{} -q nodes up 2 > /dev/null", quote(w.ferry)));
    std::system(fmt::format("{} -q nodes down --all > /dev/null", quote(w.ferry)).c_str());
  });
  const double pack_alone = best_of(2, [&] {
    w.fresh_storage();
    w.cold_hash_cache();
    shell(w.ferry_in_project("-q pack > /dev/null"));
  });

  // The cold start itself: fresh nodes, nothing in storage, nothing hashed.
  std::string breakdown;
  double ready = 1e9, env = 0;
  for (int i = 0; i < 2; ++i) {
    std::system(fmt::format("{} -q nodes down --all > /dev/null", quote(w.ferry)).c_str());
    w.fresh_storage();
    w.cold_hash_cache();
    const auto err = output_of(w.ferry_in_project("run --nodes 2 -- true 2>&1 >/dev/null"));
    const auto line = err.substr(err.rfind("ready in"));
    if (field(line, "ready in") < ready) {
      ready = field(line, "ready in");
      env = field(line, "env");
      breakdown = line.substr(0, line.find('\n'));
    }
  }
  const double bound = std::max(pack_alone, nodes_alone) + env;

  // Warm: 4 nodes with the environment in place.
  shell(fmt::format("{} -q nodes up {} > /dev/null", quote(w.ferry), warm_nodes - 2));
  shell(w.ferry_in_project("-q warmup > /dev/null"));
  const double warm_run = best_of(10, [&] { shell(w.ferry_in_project("-q run -- true")); });
  const auto registry = output_of(fmt::format("{} nodes ls", quote(w.ferry)));
  std::smatch m;
  if (!std::regex_search(registry, m, std::regex("(10\\.200\\.[0-9.]+):([0-9]+)"))) throw std::runtime_error(registry);
  const auto key = (w.dir / "XDG_CONFIG_HOME" / "ferry" / "id_ed25519").string();
  const auto ssh = fmt::format("ssh -i {} -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                               "-o LogLevel=ERROR -o KexAlgorithms=curve25519-sha256 -o BatchMode=yes -p {} root@{} true",
                               quote(key), m[2].str(), m[1].str());
  const double ssh_true = best_of(10, [&] { shell(ssh); });
  const double map20 = best_of(5, [&] {
    shell(w.ferry_in_project(
        fmt::format("-q map --range 1..20 --nodes {} --concurrency 5 -- true > /dev/null", warm_nodes)));
  });

  fmt::print("project: workspace + venv of real packages ({})\n",
             output_of(fmt::format("du -sh {} | cut -f1 | tr -d '\\n'", quote(w.project))));
  fmt::print("cold start on 2 fresh local nodes, empty storage, empty hash cache\n");
  fmt::print("  {}\n", breakdown);
  fmt::print("  ferry pack alone {:.3f} s, ferry nodes up 2 alone {:.3f} s, env (from the run) {:.3f} s\n", pack_alone,
             nodes_alone, env);
  fmt::print("  ready {:.3f} s vs max(pack, nodes) + env = {:.3f} s: {:.2f}x (goal <= 1.15x)\n", ready, bound,
             ready / bound);
  fmt::print("warm run (environment cached, node warm)\n");
  fmt::print("  ferry run -- true     {:7.3f} s\n", warm_run);
  fmt::print("  ssh node true         {:7.3f} s   ratio {:5.2f}x (goal <= 2x)\n", ssh_true, warm_run / ssh_true);
  fmt::print("ferry map of 20 x true over {} warm nodes, 5 at a time each\n", warm_nodes);
  fmt::print("  {:.3f} s (goal < 0.5 s)\n", map20);
  return 0;
}

}  // namespace

int main() { return ferry::bench::bench_main<world>("bench_run", run); }
