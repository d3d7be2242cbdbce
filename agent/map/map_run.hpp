#pragma once
// A map's work on its job's nodes: on each node K workers take tasks from the schedule (map_schedule.hpp)
// and run them; each task's line is written as it ends. Beside them the sizer replaces a lost node while
// tasks wait and grows the map when its waiting tasks would wait longer than a new node takes
// (map_growth.hpp). `ferry map` (agent/commands/map.cpp) reads the options, starts these and reports.
#include "agent/cli/progress_bar.hpp"
#include "agent/cli/command_context.hpp"
#include "agent/job/job.hpp"
#include "agent/map/map_schedule.hpp"
#include "agent/run/task_command.hpp"
#include "net/notifier.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ferry::agent {

namespace asio = boost::asio;

// Everything the workers of all nodes share. All of it lives on the I/O thread.
struct map_state {
  map_state(asio::any_io_executor io, map_schedule s) : schedule(std::move(s)), wake(std::move(io)) {}
  map_schedule schedule;
  net::notifier wake;  // wakes every waiting worker and the replacer
  std::vector<std::string> command;  // with {} for the input
  job* the_job = nullptr;
  env_vars vars;
  std::size_t per_node = 1;
  std::size_t output_limit = 0;
  std::size_t live_nodes = 0;
  std::size_t lost_nodes = 0;
  std::size_t started_nodes = 0;  // nodes asked for: the first ones, replacements and growth
  bool job_over = false;
  std::filesystem::path output;
  std::FILE* results = nullptr;  // tasks.jsonl under --output, else stdout
  std::vector<double> durations;
  double durations_sum = 0;   // of `durations`: the sizer asks for the mean after every task
  std::size_t adding = 0;     // the sizer's add_nodes calls still running
  double submitted_at = 0;
  double ran = 0;
  const command_context* ctx = nullptr;  // for the hint on a failure that the ignore rules caused
  std::set<std::string> hints;   // said once, however many tasks fail alike
  std::optional<std::chrono::steady_clock::time_point> first_task;  // when the first attempt began
  progress_bar* progress = nullptr;  // on a terminal

  void notify() { wake.notify(); }
  asio::awaitable<bool> wait() {  // false when cancelled
    boost::system::error_code ec;
    co_await wake.wait(ec);
    co_return !(co_await net::cancelled());
  }
};

// The task's line (JSON, on stdout or in DIR/tasks.jsonl) with its output kept under DIR or in the line.
void record_task(map_state& st, map_task& t);

// The map's workers on one node, until the map is done or the node is lost.
asio::awaitable<void> map_on_node(tracing::action& job_act, job_node& jn, map_state& st);

// Replaces lost nodes and grows the map, up to max_nodes in all, until the map is done.
asio::awaitable<void> map_sizer(tracing::action& act, job& j, map_state& st, std::size_t max_nodes);

// The job on `count` nodes first, with `work` on each; its result in `out`. Ends the sizer's wait.
asio::awaitable<void> run_map_job(job& j, map_state& st, std::size_t count, job_work work, diagnostics& diag,
                                  result<void>& out);

}  // namespace ferry::agent
