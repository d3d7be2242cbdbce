// `ferry trace stats` over 1,000 run traces (one file each, 12 messages per run, as
// tests/support/synthetic_runs.hpp writes them): the whole command as a user runs it (process start,
// configuration, reading, statistics, JSON out), best of 5, and the in-process stages on their own.
// Goal: the command under a second.
#include "bench/bench_support.hpp"
#include "tracing/html_view.hpp"
#include "tracing/stats_view.hpp"
#include "tracing/trace_stats.hpp"

#include "tests/support/synthetic_runs.hpp"

#include <boost/json/serialize.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>

using namespace ferry;
using clock_type = std::chrono::steady_clock;

using bench::best_of;
using bench::ferry_binary;

namespace {

constexpr std::size_t runs = 1000;
constexpr int rounds = 5;

void write_runs(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (std::size_t i = 0; i < runs; ++i) std::ofstream(dir / fmt::format("{:04}.jsonl", i)) << test::synthetic_run(i);
}

}  // namespace

int main() {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("ferry-bench-trace-stats-{}", ::getpid());
  write_runs(dir / "runs");
  const auto command = fmt::format("{} --trace {} trace stats {} --json > /dev/null", ferry_binary().string(),
                                   (dir / "self.jsonl").string(), (dir / "runs").string());
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
  const double whole = best_of(rounds, [&] { (void)std::system(command.c_str()); });

  diagnostics diag;
  tracing::trace_set set;
  const double read = best_of(rounds, [&] { set = *tracing::read_traces({dir / "runs"}, diag); });
  std::vector<tracing::task_tree> trees;
  const double build = best_of(rounds, [&] { trees = tracing::build_task_trees(set); });
  tracing::trace_stats stats;
  const double compute = best_of(rounds, [&] { stats = tracing::compute_stats(set, trees); });
  std::size_t json_bytes = 0, html_bytes = 0;
  const double json = best_of(rounds, [&] { json_bytes = boost::json::serialize(tracing::stats_to_json(stats)).size(); });
  const double html = best_of(rounds, [&] { html_bytes = tracing::render_html(set, trees, stats).size(); });
  std::filesystem::remove_all(dir);

  fmt::print("ferry trace stats --json over {} run traces ({} messages): {:.3f} s, whole command, best of {} (goal < 1 s)\n",
             runs, set.messages.size(), whole, rounds);
  fmt::print("  in process: read {:.3f} s, trees {:.3f} s, stats {:.3f} s, JSON {:.3f} s ({:.1f} MB)\n", read, build,
             compute, json, json_bytes / 1e6);
  fmt::print("ferry trace html over the same traces, in process: {:.3f} s ({:.1f} MB)\n", html, html_bytes / 1e6);
  return 0;
}
