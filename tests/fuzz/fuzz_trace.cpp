// `ferry trace` on hostile files: a trace may come from a node that was cut off, a different version, or
// someone else. The reader and every view (tree, statistics, Chrome, HTML, OTLP) must take any bytes: a bad
// line is a reported problem, never a crash.
#include "tracing/chrome_view.hpp"
#include "tracing/html_view.hpp"
#include "tracing/otlp_view.hpp"
#include "tracing/stats_view.hpp"
#include "tracing/task_tree.hpp"
#include "tracing/trace_file.hpp"
#include "tracing/trace_stats.hpp"
#include "tracing/tree_view.hpp"
#include "scratch_dir.hpp"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tracing = ferry::tracing;

namespace {

// One file per fuzzing process, rewritten for each input: the reader's interface is a path.
const std::filesystem::path& trace_path() {
  static const auto path = ferry::fuzz::make_scratch_dir("ferry-fuzz-trace") / "trace.jsonl";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream out(trace_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  ferry::diagnostics diag;
  auto set = tracing::read_traces({trace_path()}, diag);
  if (!set) std::abort();  // the file is there and readable: only lines can be bad
  const auto tasks = tracing::build_task_trees(*set);
  (void)tracing::render_tree(tasks);
  (void)tracing::render_tree(tasks, {.color = true});
  const auto stats = tracing::compute_stats(*set, tasks);
  (void)tracing::render_stats(stats);
  (void)tracing::stats_to_json(stats);
  (void)tracing::render_chrome(*set, tasks);
  (void)tracing::render_html(*set, tasks, stats);
  (void)tracing::render_otlp(*set, tasks);
  return 0;
}
