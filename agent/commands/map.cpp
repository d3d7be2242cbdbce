// `ferry map (--range A..B | --inputs FILE) [--concurrency K] [--retries R] [--output DIR] -- CMD ...{}...`:
// one task per input, spread over the job's nodes with K at once on each. A task that exits non-zero, or
// whose node is lost, is tried again (on another node when there is one) up to R more times; a lost node
// is replaced while tasks wait, up to nodes.max_nodes. Each task's exit code and output are kept: JSON
// lines on stdout, or with --output, DIR/<task>.out and .err and DIR/tasks.jsonl. A summary (done, failed,
// retried; time per task) and the start-up breakdown end on stderr; the exit code is 0 when every task
// succeeded.
#include "agent/commands/command.hpp"

#include "agent/cli/report.hpp"
#include "agent/error.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/job/job.hpp"
#include "agent/map/map_inputs.hpp"
#include "agent/map/map_run.hpp"
#include "agent/map/map_progress.hpp"
#include "agent/map/map_schedule.hpp"
#include "agent/provide/node_watchdog.hpp"
#include "agent/cli/progress_bar.hpp"
#include "agent/run/run_summary.hpp"
#include "agent/cli/plural.hpp"
#include "agent/run/task_command.hpp"
#include "net/cancellation.hpp"
#include "net/run_all.hpp"
#include "tracing/action_types.hpp"
#include "tracing/percentiles.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <set>
#include <unistd.h>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

struct map_args {
  std::string range;
  std::string inputs;
  int concurrency = 0;  // 0: agent.concurrency
  int retries = -1;     // -1: agent.retries
  int nodes = 0;        // 0: nodes.count
  std::string output;
  std::vector<std::string> env;
  std::vector<std::string> command;
};

constexpr std::size_t max_inputs = 1'000'000;

// Tasks that cannot be read or expanded are a usage error, as a bad flag is.
int fail_map(tracing::action& act, const error_code& ec, const diagnostics& diag) {
  return report(act, ec, diag, ec == errc::bad_task_input ? exit_code::usage : exit_code::failure);
}

void print_summary(const map_state& st, const startup_times& t, double seconds) {
  const auto p = tracing::summarise(st.durations);
  // When the last task ended and what followed it are told apart: the work, then ferry's own end.
  const auto last = t.work_end >= 0 ? fmt::format("last task ended at {:.2f} s, ", t.work_end) : std::string();
  fmt::print(stderr, "ferry: map: {}: {} done, {} failed, {} retried; per task p50 {:.2f} s, p99 {:.2f} s; "
                     "{}{:.2f} s in all\n",
             counted(st.schedule.tasks().size(), "task"), st.schedule.done(), st.schedule.failed(),
             st.schedule.retried(), p.p50, p.p99, last, seconds);
}

// Progress only where someone watches: both output streams on a terminal, and not -q.
bool shows_progress(const command_context& ctx) {
  return ctx.interactive && ::isatty(STDERR_FILENO) == 1 && ctx.options.verbosity >= 0;
}

std::string progress_line(const map_state& st) {
  const auto& s = st.schedule;
  std::optional<double> working;
  if (st.first_task)
    working = std::chrono::duration<double>(std::chrono::steady_clock::now() - *st.first_task).count();
  return map_progress_line({s.tasks().size(), s.done(), s.failed(), s.retried()}, working);
}

result<std::vector<std::string>> inputs_of(const map_args& args, diagnostics& diag) {
  if (args.range.empty() == args.inputs.empty()) {
    diag.set("give the inputs with either --range A..B or --inputs FILE");
    return error_code(errc::bad_task_input);
  }
  if (!args.range.empty()) return range_inputs(args.range, max_inputs, diag);
  return file_inputs(args.inputs, diag);
}

asio::awaitable<int> map(command_context& ctx, const map_args& args) {
  auto& act = ctx.trace;
  const auto& s = ctx.config.values;
  diagnostics diag;
  if (args.command.empty()) {
    print_error("give the command after --, e.g. ferry map --range 1..20 -- python job.py {}");
    co_return exit_code::usage;
  }
  auto inputs = inputs_of(args, diag);
  if (!inputs) co_return fail_map(act, inputs.error(), diag);
  map_state st(ctx.io, map_schedule(std::move(*inputs), args.retries >= 0 ? args.retries : s.agent.retries));
  st.command = args.command;
  if (std::string why; !parse_env_vars(args.env, st.vars, why)) {
    print_error(why);
    co_return exit_code::usage;
  }
  st.output_limit = static_cast<std::size_t>(s.agent.task_output_limit.bytes);
  st.per_node = static_cast<std::size_t>(std::max(1, args.concurrency > 0 ? args.concurrency : s.agent.concurrency));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> results(nullptr, std::fclose);
  st.results = stdout;
  if (!args.output.empty()) {
    st.output = args.output;
    std::error_code fs_ec;
    std::filesystem::create_directories(st.output, fs_ec);
    results.reset(std::fopen((st.output / "tasks.jsonl").c_str(), "w"));
    if (fs_ec || !results) {
      diag.set(fmt::format("--output {}: cannot write there", args.output));
      co_return fail_map(act, errc::bad_task_input, diag);
    }
    st.results = results.get();
  }

  const auto tasks = st.schedule.tasks().size();
  const auto wanted = (tasks + st.per_node - 1) / st.per_node;
  const auto first = static_cast<std::size_t>(args.nodes > 0 ? args.nodes : s.nodes.count);
  const auto max_nodes = std::max(first, static_cast<std::size_t>(std::max(1, s.nodes.max_nodes)));
  // nodes.count (or --nodes) to begin with, no more than the tasks can use; more only while the map runs,
  // when its tasks have shown they would wait longer than a new node takes (sizer).
  const auto count = std::max<std::size_t>(1, std::min(first, wanted));
  st.started_nodes = count;
  act.log(action_types::map::tasks, {{"tasks", tasks}, {"per_node", st.per_node}, {"nodes", count}});

  job j(ctx, act);
  if (auto opened = j.open("", diag); !opened) co_return fail_map(act, opened.error(), diag);
  j.lazy_start(s.agent.lazy_start && runs_python(args.command));
  j.check_python(python_program(args.command));
  st.submitted_at = unix_now();
  st.the_job = &j;
  st.ctx = &ctx;
  auto work = [&act, &st](job_node& jn) { return map_on_node(act, jn, st); };
  result<void> ran;
  std::vector<asio::awaitable<void>> parts;
  parts.push_back(run_map_job(j, st, count, work, diag, ran));
  parts.push_back(map_sizer(act, j, st, max_nodes));
  std::optional<progress_bar> bar;
  if (shows_progress(ctx)) {
    bar.emplace(ctx.io, [&st](double) { return progress_line(st); });
    st.progress = &*bar;
    parts.push_back(bar->run());
  }
  co_await net::run_all(std::move(parts));
  st.progress = nullptr;
  if (co_await net::cancelled()) {
    if (ctx.options.verbosity >= 0)
      fmt::print(stderr, "ferry: map: interrupted: {}\n", interrupted_map_line(tally_of(st.schedule)));
    co_return fail_map(act, asio::error::operation_aborted, diag);
  }
  if (!st.schedule.finished()) {
    st.schedule.fail_waiting("no node was left to run it");
    for (std::size_t i = 0; i < st.schedule.tasks().size(); ++i) {
      auto& t = st.schedule.task(i);
      if (t.now == map_task::state::failed && t.error == "no node was left to run it") record_task(st, t);
    }
  }
  const double seconds = j.since_start();  // the origin of the start-up line's times
  if (!ran && st.schedule.done() == 0) co_return fail_map(act, ran.error(), diag);
  for (const auto& f : j.failures()) fmt::print(stderr, "ferry: warning: {}\n", f);
  if (ctx.options.verbosity >= 0) {
    const auto& t = j.times();
    print_summary(st, t, seconds);
    const double working = t.work_end >= 0 && t.first_work >= 0 ? t.work_end - t.first_work : 0;
    fmt::print(stderr, "ferry: {}\n", startup_line(t, working, j.since_start()));
  }
  if (st.schedule.failed() > 0) {
    act.fail_exception("tasks", fmt::format("{} of {} tasks failed", st.schedule.failed(), tasks));
    co_return exit_code::failure;
  }
  co_return exit_code::success;
}

}  // namespace

void add_map_command(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<map_args>();
  auto provider = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("map", "run a command once per input, spread over nodes");
  cmd->add_option("--range", args->range, "inputs A..B, both included");
  cmd->add_option("--inputs", args->inputs, "a file of inputs, one per line (- for stdin)");
  cmd->add_option("--concurrency", args->concurrency, "tasks at once per node (agent.concurrency)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--retries", args->retries, "further attempts of a failed task (agent.retries)")
      ->check(CLI::Range(0, 100));
  cmd->add_option("--nodes", args->nodes, "nodes to start with (nodes.count)")
      ->check(CLI::Range(1, config::max_node_count));
  cmd->add_option("--output", args->output, "write each task's output to DIR/<task>.out and .err");
  cmd->add_option("--provider", *provider, "local, ssh or ec2 (nodes.provider)");
  cmd->add_option("--env", args->env, "set NAME=VALUE in each task's environment; NAME alone passes on the value it has here "
                  "(repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->footer("  ferry map --range 1..20 -- python job.py {}");
  cmd->callback([&selected, args, provider] {
    selected.action_type = action_types::map::job;
    selected.takes_command = true;
    if (!provider->empty()) selected.config_flags.push_back({"nodes.provider", *provider, "--provider"});
    selected.run = [args](command_context& ctx) {
      args->command = ctx.options.command;
      return map(ctx, *args);
    };
  });
}

}  // namespace ferry::agent
