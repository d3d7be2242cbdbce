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
#include "agent/run/ignored_hint.hpp"
#include "agent/job/job.hpp"
#include "agent/cli/json_output.hpp"
#include "agent/map/map_growth.hpp"
#include "agent/map/map_inputs.hpp"
#include "agent/map/map_progress.hpp"
#include "agent/map/map_schedule.hpp"
#include "agent/run/node_output.hpp"
#include "agent/provide/node_watchdog.hpp"
#include "agent/cli/progress_bar.hpp"
#include "agent/run/run_summary.hpp"
#include "agent/cli/plural.hpp"
#include "agent/run/task_command.hpp"
#include "agent/run/task_outcome.hpp"
#include "net/cancellation.hpp"
#include "net/error.hpp"
#include "net/notifier.hpp"
#include "net/run_all.hpp"
#include "net/task_group.hpp"
#include "net/node_link.hpp"
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

// Everything the workers of all nodes share. All of it lives on the I/O thread.
struct map_state {
  map_state(asio::any_io_executor io, map_schedule s) : schedule(std::move(s)), wake(std::move(io)) {}
  map_schedule schedule;
  net::notifier wake;  // wakes every waiting worker and the replacer
  const map_args* args = nullptr;
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

// The task's line is written, and its output let go: ten thousand tasks must not all stay in memory.
void record(map_state& st, map_task& t) {
  json::object line{{"task", t.index},   {"input", t.input},       {"exit_code", t.exit_code},
                    {"node", t.node},    {"attempts", t.attempts}, {"seconds", json_seconds(t.seconds)},
                    {"ok", t.now == map_task::state::done}};
  if (!t.error.empty()) line["error"] = t.error;
  if (st.output.empty()) {
    line["stdout"] = t.out;
    line["stderr"] = t.err;
  } else {
    std::ofstream(st.output / fmt::format("{}.out", t.index), std::ios::binary) << t.out;
    std::ofstream(st.output / fmt::format("{}.err", t.index), std::ios::binary) << t.err;
  }
  if (st.progress && st.results == stdout) st.progress->clear();
  fmt::print(st.results, "{}\n", json_line(line));
  std::fflush(st.results);
  std::string().swap(t.out);
  std::string().swap(t.err);
}

// One attempt of task i on this node. Returns false when the node is lost.
asio::awaitable<bool> attempt(tracing::action& job_act, job_node& jn, map_state& st, std::size_t i) {
  auto& t = st.schedule.task(i);
  auto task = job_act.child(action_types::agent::task, {{"node", jn.ready.node.id},
                                                        {"submitted_at", st.submitted_at},
                                                        {"task", i},
                                                        {"input", t.input},
                                                        {"attempt", t.attempts}});
  net::collect_sink sink(st.output_limit);
  net::exec_request request;
  const auto line = task_command(jn.env, task.hand_off_task_id(), st.vars, task_argv(st.args->command, t.input));
  request.command = command_for(jn.ready.node, line.command);
  net::buffer_source env_input(line.input);
  if (!line.input.empty()) request.input = &env_input;
  request.output = &sink;
  const auto begin = std::chrono::steady_clock::now();
  if (!st.first_task) st.first_task = begin;
  diagnostics diag;
  auto done = co_await jn.ready.link->exec(task, request, diag);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  t.out = std::move(sink.out);
  t.err = std::move(sink.err);
  if (done) {
    const int code = exit_code_of(*done);
    const auto v = st.schedule.exited(i, code);
    if (code == 0) {
      task.succeed({{"exit_code", 0}});
    } else {
      task.fail_exception("exit", fmt::format("exit code {}", code));
    }
    // A failure's cause, if the ignore rules made it (agent/run/ignored_hint.hpp): said once for all alike.
    std::string tail = v == map_schedule::verdict::failed ? t.err.substr(t.err.size() > 4096 ? t.err.size() - 4096 : 0)
                                                          : std::string();
    if (v != map_schedule::verdict::retry) {
      st.durations.push_back(t.seconds);
      st.durations_sum += t.seconds;
      record(st, t);
    }
    if (!tail.empty()) {
      auto hint = co_await ignored_hint(*st.ctx, std::move(tail), jn.env.workdir);
      if (hint && st.hints.insert(*hint).second) {
        if (st.progress) st.progress->clear();  // the hint's own line, not the end of the progress line
        fmt::print(stderr, "ferry: hint: {}\n", *hint);
      }
    }
    co_return true;
  }
  task.fail(done.error(), diag);
  const auto why = describe(done.error(), diag);
  if (co_await net::cancelled()) {
    // Cut short by Ctrl-C: neither done nor failed, and the summary says so.
    t.error = "interrupted";
    record(st, t);
    co_return false;
  }
  if (done.error() == net::errc::output_too_large) {
    st.schedule.broke(i, why);
    record(st, t);
    co_return true;
  }
  if (st.schedule.node_lost(i, fmt::format("node {}: {}", jn.ready.node.id, why)) == map_schedule::verdict::failed) {
    record(st, t);
  }
  co_return false;
}

struct node_slot {
  bool lost = false;
};

asio::awaitable<void> worker(tracing::action& job_act, job_node& jn, map_state& st, node_slot& slot) {
  co_await net::accept_cancellation();
  while (!st.schedule.finished() && !slot.lost) {
    if (co_await net::cancelled()) break;  // no task starts once the map is cancelled
    auto next = st.schedule.take(jn.ready.node.id, st.live_nodes);
    if (!next) {
      if (!co_await st.wait()) break;
      continue;
    }
    bool lost_now = false;
    if (!co_await attempt(job_act, jn, st, *next) && !slot.lost) {
      slot.lost = lost_now = true;
      ++st.lost_nodes;
    }
    // The last task ended: nothing waits for the nodes that have not begun, nor for layers no task took.
    if (st.schedule.finished()) {
      st.the_job->work_ended();
      st.the_job->work_over();
    }
    // Waiting workers wake only when there is something for them: a task back in the queue, the end of
    // the map, or a lost node to replace. Waking all thousand of them after every task is quadratic.
    if (st.schedule.waiting() > 0 || st.schedule.finished() || lost_now) st.notify();
    if (co_await net::cancelled()) break;
  }
}

asio::awaitable<void> on_node(tracing::action& job_act, job_node& jn, map_state& st) {
  node_slot slot;
  ++st.live_nodes;
  std::vector<asio::awaitable<void>> workers;
  for (std::size_t k = 0; k < st.per_node; ++k) workers.push_back(worker(job_act, jn, st, slot));
  co_await net::run_all(std::move(workers));
  --st.live_nodes;
  if (slot.lost) job_act.log(action_types::map::node_lost, {{"node", jn.ready.node.id}});
  st.notify();
}

// What a task takes, as far as the map has seen: the mean of those that ended; 0 before any has.
double task_seconds(const map_state& st) {
  return st.durations.empty() ? 0 : st.durations_sum / static_cast<double>(st.durations.size());
}

// The nodes' work ends with the map; the sizer is told, since a node added after the job's first ones were
// all lost is the last one working, and it may be lost too.
asio::awaitable<void> more_nodes(job& j, map_state& st, std::size_t count) {
  ++st.adding;
  co_await j.add_nodes(count);
  --st.adding;
  st.notify();
}

// The map's size while it runs, up to nodes.max_nodes in all: a lost node is replaced while tasks wait,
// and the map grows when its waiting tasks would wait longer than a new node takes (map_growth.hpp).
// Nodes it adds come in beside the work; it waits for them before it ends.
asio::awaitable<void> sizer(tracing::action& act, job& j, map_state& st, std::size_t max_nodes) {
  co_await net::accept_cancellation();
  net::task_group adding(co_await asio::this_coro::executor);
  std::size_t replaced = 0;
  while (!st.schedule.finished()) {
    if (st.lost_nodes > replaced && st.started_nodes < max_nodes && st.schedule.waiting() > 0) {
      ++replaced;
      ++st.started_nodes;
      adding.spawn(more_nodes(j, st, 1));
      continue;
    }
    map_pace pace{st.schedule.waiting(), st.started_nodes - st.lost_nodes, st.per_node, max_nodes, task_seconds(st),
                  j.new_node_seconds()};
    auto g = growth_of(pace);
    g.add = std::min(g.add, max_nodes - std::min(max_nodes, st.started_nodes));  // lost nodes count too
    if (g.add > 0) {
      if (st.progress) st.progress->clear();  // the line of its own, not the end of the progress line
      fmt::print(stderr, "ferry: map: {}\n", growth_line(pace, g));
      act.log(action_types::map::grow, {{"add", g.add}, {"waiting", pace.waiting}, {"wait_seconds", g.wait_seconds},
                                        {"task_seconds", pace.task_seconds}, {"node_seconds", pace.node_seconds}});
      st.started_nodes += g.add;
      adding.spawn(more_nodes(j, st, g.add));
      continue;
    }
    // The job's first nodes are done; nodes this added may still be working, and may yet be lost.
    if (st.job_over && st.adding == 0) break;
    if (!co_await st.wait()) break;
  }
  if (co_await net::cancelled()) adding.cancel();
  co_await adding.wait(true);  // Ctrl-C while they finish reaches them too
}

asio::awaitable<void> run_job(job& j, map_state& st, std::size_t count, job_work work, diagnostics& diag,
                              result<void>& out) {
  co_await net::accept_cancellation();
  out = co_await j.run(count, std::move(work), diag);
  if (st.progress) st.progress->stop();
  st.job_over = true;
  st.notify();
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
  st.args = &args;
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
  auto work = [&act, &st](job_node& jn) { return on_node(act, jn, st); };
  result<void> ran;
  std::vector<asio::awaitable<void>> parts;
  parts.push_back(run_job(j, st, count, work, diag, ran));
  parts.push_back(sizer(act, j, st, max_nodes));
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
      if (t.now == map_task::state::failed && t.error == "no node was left to run it") record(st, t);
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
