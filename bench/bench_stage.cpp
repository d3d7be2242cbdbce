// Data staging: 1 GiB in 1,000 objects from moto_server onto a local node, `ferry run --stage` against
// `aws s3 cp --recursive` run on the same node against the same moto_server, side by side, each into a
// fresh directory. ferry's figure is the staging step itself (the `ferry:stage` action's seconds, from
// the run's trace); aws's (Debian's awscli) is its own run on the node, through `ferry exec` (~0.1 s more).
#include "bench/bench_support.hpp"
#include "bench/bench_world.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using ferry::bench::best_of;
using ferry::bench::first_line;
using ferry::bench::output_of;
using ferry::bench::quote;
using ferry::bench::shell;

namespace {

constexpr int objects = 1000;
constexpr std::uint64_t total_bytes = 1ull << 30;

struct world : ferry::bench::node_world {
  std::uint64_t bytes = 0;  // of the data, as made

  explicit world(std::string binary) : node_world("stage", std::move(binary)) {
    fs::create_directories(dir / "project");
    ::setenv("FERRY_STORAGE_URL", "s3://bench/project", 1);
    // A project with nothing to ship but itself: the bench is about the data.
    std::ofstream(dir / "project" / "ferry.toml") << "[packaging]\nship_site_packages = false\n";
  }
  std::string in_project(const std::string& args) const {
    return fmt::format("cd {} && {} {}", quote(dir / "project"), quote(ferry), args);
  }
};

// 1,000 files of 0.5 to 1.5 MiB (1 GiB in all), uploaded once.
void make_data(world& w) {
  const auto data = w.dir / "data";
  fs::create_directories(data);
  std::mt19937_64 random(42);
  const std::uint64_t mean = total_bytes / objects;
  std::vector<char> buf(mean * 2);
  for (auto& b : buf) b = static_cast<char>(random());
  for (int i = 0; i < objects; ++i) {
    const auto size = mean / 2 + random() % mean;
    w.bytes += size;
    std::ofstream(data / fmt::format("part-{:04}.bin", i), std::ios::binary)
        .write(buf.data() + random() % mean, static_cast<std::streamsize>(size));
  }
  shell(fmt::format("aws s3 cp --recursive --quiet {} s3://bench/data", quote(data)));
}

double stage_seconds(const fs::path& trace) {
  std::ifstream in(trace);
  std::string line;
  std::smatch m;
  const std::regex seconds(
      fmt::format(R"re("action_type":"{}".*"seconds":([0-9.eE+-]+))re", ferry::action_types::agent::stage));
  while (std::getline(in, line)) {
    if (line.find("\"succeeded\"") != std::string::npos && std::regex_search(line, m, seconds)) return std::stod(m[1]);
  }
  throw std::runtime_error(fmt::format("no {} end in {}", ferry::action_types::agent::stage, trace.string()));
}

int run(world& w) {
  shell(fmt::format("{} -q nodes up 1 > /dev/null", quote(w.ferry)));
  w.start_moto();
  make_data(w);
  // Debian's aws CLI (setup.sh installs awscli): a node sees the system's /usr, not this user's home.
  const std::string aws = "/usr/bin/aws";
  int round = 0;
  double ferry_best = 1e9, ferry_wall = 1e9;
  for (int i = 0; i < 2; ++i) {
    const auto target = w.dir / fmt::format("ferry-{}", ++round);
    const auto trace = w.dir / fmt::format("stage-{}.jsonl", round);
    const auto start = std::chrono::steady_clock::now();
    shell(w.in_project(fmt::format("-q --trace {} run --stage s3://bench/data={} -- true", quote(trace),
                                   quote(target))));
    ferry_wall = std::min(ferry_wall,
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    ferry_best = std::min(ferry_best, stage_seconds(trace));
    shell(fmt::format("du -sb --exclude=.ferry-stage {} > /dev/null", quote(target)));
    fs::remove_all(target);
  }
  const double aws_best = best_of(2, [&] {
    const auto target = w.dir / fmt::format("aws-{}", ++round);
    shell(fmt::format("{} -q exec -- env AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench "
                      "AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null "
                      "{} --endpoint-url {} s3 cp --recursive --quiet s3://bench/data {}",
                      quote(w.ferry), quote(aws), w.endpoint, quote(target)));
    fs::remove_all(target);
  });
  fmt::print("staging {:.2f} GiB in {} objects from moto_server onto a local node, into a fresh directory\n",
             static_cast<double>(w.bytes) / (1ull << 30), objects);
  fmt::print("  ferry run --stage (the {} step)   {:7.2f} s   {:6.0f} MB/s   (whole run {:.2f} s)\n",
             ferry::action_types::agent::stage, ferry_best, static_cast<double>(w.bytes) / ferry_best / 1e6,
             ferry_wall);
  fmt::print("  aws s3 cp --recursive on the node          {:7.2f} s   {:6.0f} MB/s   ferry is {:.1f}x faster "
             "(goal >= 2x)\n",
             aws_best, static_cast<double>(w.bytes) / aws_best / 1e6, aws_best / ferry_best);
  return 0;
}

}  // namespace

int main() { return ferry::bench::bench_main<world>("bench_stage", run); }
