// A real environment shipped to 2 fresh local nodes, side by side with the peers, in one run: a small
// workspace beside a venv that holds this machine's own site-packages (the interpreter's, without
// __pycache__), and on each node `python3 main.py`, which imports boto3, botocore and yaml from it.
//   ferry       `ferry run --nodes 2` on fresh nodes (empty layer caches), an empty storage prefix and a cold
//               hash cache; then warm, after one workspace file was edited; then the env step alone: fresh
//               nodes again with the layers already in storage.
//   rsync       `rsync -a` over ssh into a directory of its own per node, both nodes at once, then
//               `ssh node python3 main.py`; warm: the same again after the edit.
//   zip + s3    one `zip -r`, `aws s3 cp` up, then on each node `aws s3 cp` down and `unzip`, both nodes at
//               once, then `ssh node python3 main.py`. Its node-side part (download and unzip) is timed alone.
// Goals (issue 15): cold and warm at most 0.4x rsync's time; ferry's env step at most 0.5x the zip peer's
// node-side time. Each figure is the best of `rounds` rounds (FERRY_BENCH_ROUNDS, default 2).
//
// With FERRY_BENCH_UPLINK_MBIT=N the workstation sits behind an uplink of N Mbit/s each way (the test
// proxy's rate, one link shared by every connection): ferry's and the aws CLI's S3 endpoint and each
// node's ssh port for rsync go through it, while the nodes reach storage directly, as in one cloud region.
// Then only cold starts are run, against `rsync -a` and `rsync -az` (goals: at most 0.3x and 0.6x).
#include "bench/bench_peers.hpp"
#include "bench/bench_support.hpp"
#include "bench/bench_world.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>

namespace fs = std::filesystem;
using ferry::bench::all_of;
using ferry::bench::first_line;
using ferry::bench::node_address;
using ferry::bench::seconds_of;
using ferry::bench::uplink;
using ferry::bench::field;
using ferry::bench::output_of;
using ferry::bench::quote;
using ferry::bench::shell;
using ferry::bench::site_packages_of;

namespace {

struct world : ferry::bench::node_world {
  fs::path project = dir / "project";
  int prefix = 0;
  std::string ssh;  // ssh with ferry's key, no host checks, the cheap key exchange
  uplink link;
  std::string node_endpoint;  // storage as the nodes reach it: directly

  explicit world(std::string binary) : node_world("cold", std::move(binary)) {
    fs::create_directories(project);
    ssh = ferry::bench::ssh_with_key(dir / "XDG_CONFIG_HOME");
  }
  std::string in_project(const std::string& command) const { return fmt::format("cd {} && {}", quote(project), command); }
  void fresh_storage() { ::setenv("FERRY_STORAGE_URL", fmt::format("s3://bench/cold{}", ++prefix).c_str(), 1); }
  void cold_hash_cache() const { ferry::bench::cold_hash_cache(dir); }
  // Two fresh nodes: nothing in their caches.
  std::vector<node_address> fresh_nodes() const { return ferry::bench::fresh_local_nodes(ferry, 2); }
  // moto behind the uplink for the workstation (ferry and the aws CLI), directly for the nodes.
  void storage_behind_uplink() { node_endpoint = ferry::bench::storage_behind_uplink(link, endpoint); }
};


void make_project(world& w) {
  fs::create_directories(w.project / "app");
  std::ofstream(w.project / "app" / "__init__.py") << "VALUE = 1\n";
  std::ofstream(w.project / "main.py") << "import app, boto3, botocore, yaml\nprint(app.VALUE, boto3.__version__)\n";
  std::ofstream(w.project / "ferry.toml") << "[packaging]\npython = \".venv/bin/python\"\n";
  shell(fmt::format("/usr/bin/python3 -m venv --without-pip {}", quote(w.project / ".venv")));
  const auto source = site_packages_of("python3");  // this machine's own interpreter's
  const auto site = site_packages_of(quote(w.project / ".venv" / "bin" / "python"));
  shell(fmt::format("rsync -a --exclude __pycache__ --exclude '*.pyc' {}/ {}/", quote(source), quote(site)));
}

// What the peers copy: the project as ferry ships it (no __pycache__, no .pyc).
const char* excludes = "--exclude __pycache__ --exclude '*.pyc'";


// `nodes` as the workstation reaches their ssh (over the uplink, when there is one).
double rsync_round(const world& w, const std::vector<node_address>& nodes, const std::string& dir,
                   const char* flags = "-a") {
  return ferry::bench::rsync_to_all(w.ssh, nodes, w.project, dir, fmt::format("{} {}", flags, excludes),
                                    [&](const node_address& n, const std::string& d) { return ferry::bench::python_main_in(w.ssh, n, d); });
}

struct zip_times {
  double total = 0;
  double node_side = 0;
};

zip_times zip_round(const world& w, const std::vector<node_address>& nodes, int round) {
  zip_times t;
  const auto zip = w.dir / "peer.zip";
  const auto key = fmt::format("s3://bench/peer/{}.zip", round);
  const auto dir = fmt::format("/tmp/ferry-bench-zip-{}", round);
  t.total = seconds_of([&] {
    fs::remove(zip);
    shell(w.in_project(fmt::format("zip -qr {} . -x '*/__pycache__/*' '*.pyc'", quote(zip))));
    shell(fmt::format("aws s3 cp --only-show-errors {} {}", quote(zip), key));
    t.node_side = seconds_of([&] {
      std::string both;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        const auto d = fmt::format("{}-{}", dir, i);
        // The nodes reach storage directly.
        both += fmt::format(
            "( mkdir -p {0} && aws s3 cp --endpoint-url {2} --only-show-errors {1} {0}.zip && unzip -qo {0}.zip -d {0} ) "
            "& p=\"$p $!\"; ",
            d, key, w.node_endpoint);
      }
      shell(all_of(both));
    });
    for (std::size_t i = 0; i < nodes.size(); ++i)
      shell(ferry::bench::python_main_in(w.ssh, nodes[i], fmt::format("{}-{}", dir, i)));
  });
  shell(fmt::format("rm -rf {}-*", dir));
  return t;
}

struct ferry_times {
  double total = 0;
  double env = 0;
  std::string line;
};

ferry_times ferry_round(world& w) {
  ferry_times t;
  std::string err;
  t.total = seconds_of([&] { err = output_of(w.in_project(fmt::format("{} run --nodes 2 -- python3 main.py 2>&1 >/dev/null", quote(w.ferry)))); });
  t.line = first_line(err.substr(err.rfind("ready in")));
  t.env = field(t.line, "env");
  return t;
}

// Cold starts only, the workstation behind the uplink.
int run_uplink(world& w, int rounds, double mbit) {
  double ferry_cold = 1e9, rsync_a = 1e9, rsync_az = 1e9, zip_total = 1e9;
  std::string cold_line;
  for (int r = 0; r < rounds; ++r) {
    auto nodes = w.fresh_nodes();
    w.fresh_storage();
    w.cold_hash_cache();
    const auto cold = ferry_round(w);
    if (cold.total < ferry_cold) {
      ferry_cold = cold.total;
      cold_line = cold.line;
    }
    const auto far = w.link.through(nodes);
    const auto dir = fmt::format("/tmp/ferry-bench-rsync-{}", r);
    rsync_a = std::min(rsync_a, rsync_round(w, far, dir, "-a"));
    shell(fmt::format("rm -rf {}-*", dir));
    rsync_az = std::min(rsync_az, rsync_round(w, far, dir, "-az"));
    shell(fmt::format("rm -rf {}-*", dir));
    zip_total = std::min(zip_total, zip_round(w, far, r).total);
  }
  fmt::print("project: workspace + venv of this machine's site-packages ({} in {} files, without __pycache__)\n",
             first_line(output_of(w.in_project("du -sh --exclude __pycache__ . | cut -f1"))),
             first_line(output_of(w.in_project("find . -type f -not -path '*/__pycache__/*' | wc -l"))));
  fmt::print("2 fresh local nodes; the workstation behind a {} Mbit/s uplink (nodes reach storage directly); best of {} rounds\n",
             mbit, rounds);
  fmt::print("cold start (to main.py's last line on both nodes)\n");
  fmt::print("  ferry run --nodes 2     {:7.2f} s   {}\n", ferry_cold, cold_line);
  fmt::print("  rsync -a over ssh       {:7.2f} s   ferry/rsync -a  {:.2f}x (goal <= 0.3x)\n", rsync_a, ferry_cold / rsync_a);
  fmt::print("  rsync -az over ssh      {:7.2f} s   ferry/rsync -az {:.2f}x (goal <= 0.6x)\n", rsync_az, ferry_cold / rsync_az);
  fmt::print("  zip + aws s3 + unzip    {:7.2f} s   ferry/zip {:.2f}x\n", zip_total, ferry_cold / zip_total);
  return 0;
}

int run(world& w) {
  make_project(w);
  w.fresh_nodes();  // the first nodes make the bridge moto listens on
  w.start_moto();
  const int rounds = std::getenv("FERRY_BENCH_ROUNDS") ? std::atoi(std::getenv("FERRY_BENCH_ROUNDS")) : 2;
  const double mbit = std::getenv("FERRY_BENCH_UPLINK_MBIT") ? std::atof(std::getenv("FERRY_BENCH_UPLINK_MBIT")) : 0;
  w.link.rate = static_cast<std::uint64_t>(mbit * 1e6 / 8);
  w.storage_behind_uplink();
  if (w.link.rate > 0) return run_uplink(w, rounds, mbit);

  double ferry_cold = 1e9, ferry_warm = 1e9, ferry_env = 1e9, rsync_cold = 1e9, rsync_warm = 1e9, zip_total = 1e9,
         zip_node = 1e9;
  std::string cold_line, warm_line;
  for (int r = 0; r < rounds; ++r) {
    // ferry: fresh nodes, fresh storage, cold hash cache; then one file edited.
    auto nodes = w.fresh_nodes();
    w.fresh_storage();
    w.cold_hash_cache();
    shell(w.in_project("sed -i 's/VALUE = .*/VALUE = 1/' app/__init__.py"));
    const auto cold = ferry_round(w);
    if (cold.total < ferry_cold) {
      ferry_cold = cold.total;
      cold_line = cold.line;
    }
    shell(w.in_project(fmt::format("sed -i 's/VALUE = .*/VALUE = {}/' app/__init__.py", r + 2)));
    const auto warm = ferry_round(w);
    if (warm.total < ferry_warm) {
      ferry_warm = warm.total;
      warm_line = warm.line;
    }
    // The env step alone: fresh nodes, the layers already in storage (the cold round put them there), so
    // the pack ends at once and the line's env is the whole of the nodes' work.
    nodes = w.fresh_nodes();
    shell(w.in_project("sed -i 's/VALUE = .*/VALUE = 1/' app/__init__.py"));
    ferry_env = std::min(ferry_env, ferry_round(w).env);

    // rsync into directories of its own on the same nodes: its cold start copies everything.
    const auto dir = fmt::format("/tmp/ferry-bench-rsync-{}", r);
    shell(w.in_project("sed -i 's/VALUE = .*/VALUE = 1/' app/__init__.py"));
    rsync_cold = std::min(rsync_cold, rsync_round(w, nodes, dir));
    shell(w.in_project(fmt::format("sed -i 's/VALUE = .*/VALUE = {}/' app/__init__.py", r + 2)));
    rsync_warm = std::min(rsync_warm, rsync_round(w, nodes, dir));
    shell(fmt::format("rm -rf {}-*", dir));

    const auto z = zip_round(w, nodes, r);
    zip_total = std::min(zip_total, z.total);
    zip_node = std::min(zip_node, z.node_side);
  }

  fmt::print("project: workspace + venv of this machine's site-packages ({} in {} files, without __pycache__)\n",
             first_line(output_of(w.in_project("du -sh --exclude __pycache__ . | cut -f1"))),
             first_line(output_of(w.in_project("find . -type f -not -path '*/__pycache__/*' | wc -l"))));
  fmt::print("2 fresh local nodes; best of {} rounds\n", rounds);
  fmt::print("cold start (to main.py's last line on both nodes)\n");
  fmt::print("  ferry run --nodes 2     {:7.2f} s   {}\n", ferry_cold, cold_line);
  fmt::print("  rsync -a over ssh       {:7.2f} s   ferry/rsync {:.2f}x (goal <= 0.4x)\n", rsync_cold, ferry_cold / rsync_cold);
  fmt::print("  zip + aws s3 + unzip    {:7.2f} s   ferry/zip {:.2f}x\n", zip_total, ferry_cold / zip_total);
  fmt::print("warm start (one workspace file edited)\n");
  fmt::print("  ferry run --nodes 2     {:7.2f} s   {}\n", ferry_warm, warm_line);
  fmt::print("  rsync -a over ssh       {:7.2f} s   ferry/rsync {:.2f}x (goal <= 0.4x)\n", rsync_warm, ferry_warm / rsync_warm);
  fmt::print("env step (layers onto 2 fresh nodes, already in storage)\n");
  fmt::print("  ferry env               {:7.2f} s\n", ferry_env);
  fmt::print("  zip peer's node side    {:7.2f} s   ferry/zip {:.2f}x (goal <= 0.5x)\n", zip_node, ferry_env / zip_node);
  return 0;
}

}  // namespace

int main() { return ferry::bench::bench_main<world>("bench_cold", run); }
