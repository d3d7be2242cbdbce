// `ferry run [--nodes N] [--provider P] [--env K=V]... -- CMD ARGS...`: the project packed and shipped
// while nodes are provided, its layers materialised on each node, then CMD run there in the workspace
// with the project's Python path. Output streams back (prefixed by node when there are several); the
// exit code is the command's (128 + N for a signal N), or the first failing node's. Ctrl-C kills the
// remote process groups, aborts uploads and exits 130. The last line on stderr says where the start-up
// time went.
#include "agent/commands/command.hpp"

#include "agent/cli/report.hpp"
#include "agent/error.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/run/ignored_hint.hpp"
#include "agent/job/job.hpp"
#include "agent/run/node_output.hpp"
#include "agent/provide/node_watchdog.hpp"
#include "agent/run/run_summary.hpp"
#include "agent/materialise/stage.hpp"
#include "agent/materialise/node_staging.hpp"
#include "agent/run/task_command.hpp"
#include "agent/run/task_outcome.hpp"
#include "net/cancellation.hpp"
#include "net/node_link.hpp"
#include "net/shell_quote.hpp"
#include "config/units.hpp"
#include "tracing/action_types.hpp"


#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <set>
#include <sstream>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;

struct run_args {
  int nodes = 0;  // 0: nodes.count
  std::vector<std::string> env;
  std::vector<std::string> stages;  // s3://BUCKET/PREFIX=NODE_DIR
  std::string stage_window;         // bytes; empty: stage everything before the command
  std::string stage_order;          // a file naming the objects in the order to deliver them
  std::vector<std::string> command;
};

struct node_result {
  std::string node;
  std::string name;  // as its output lines are prefixed
  int code = exit_code::failure;
  std::string last_err;  // the last line it wrote on stderr
  error_code error;
  diagnostics diag;
};

struct run_state {
  const run_args& args;
  env_vars vars;
  std::vector<stage_plan> stages;
  stage_options staging;
  bool prefixed = false;
  std::deque<node_result> results;  // grows while other nodes hold references to their own entries
  std::chrono::steady_clock::time_point first_start{};
  double ran = 0;
  std::function<void()> on_first_output;  // the start-up line's "first line at"
  std::function<void()> on_work_ended;    // a node's command ended: the start-up line's "after the work"
  const command_context* ctx = nullptr;   // for the hint on a failure that the ignore rules caused
  std::set<std::string> hints;            // said once, however many nodes fail alike
};

result<std::string> read_order_file(const std::string& file, diagnostics& diag) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    diag.set(fmt::format("--stage-order {}: cannot be read", file));
    return error_code(errc::bad_stage);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

asio::awaitable<void> run_on(tracing::action& job_act, job_node& jn, run_state& state) {
  const auto start = std::chrono::steady_clock::now();
  if (state.first_start == std::chrono::steady_clock::time_point{}) state.first_start = start;
  auto& result = state.results.emplace_back();
  result.node = jn.ready.node.id;
  result.name = jn.ready.node.name;
  const bool streaming = !state.stages.empty() && state.stages.front().window > 0;
  // On a pool's node, staged as the tenant's own user (it outlives the stager, which refers to it).
  auto staging = state.staging;
  staging.tenant = jn.ready.tenant_user;
  if (!state.stages.empty() && !streaming) {
    if (auto ec = co_await stage_all(job_act, *jn.ready.link, state.stages, staging, result.diag); ec) {
      result.error = ec;
      co_return;
    }
  }
  stager streamer;
  if (streaming) start_stager(co_await asio::this_coro::executor, job_act, *jn.ready.link, state.stages, staging, streamer);
  auto task = job_act.child(action_types::agent::task, {{"node", jn.ready.node.id},
                                                        {"submitted_at", unix_now()},
                                                        {"command", net::quote_argv(state.args.command)}});
  node_output output(state.prefixed ? fmt::format("{} | ", jn.ready.node.name) : std::string(),
                     state.on_first_output);
  net::exec_request request;
  auto line = task_command(jn.env, task.hand_off_task_id(), state.vars, state.args.command);
  // The stream's directories exist before the command looks for them, however late the stager starts.
  if (streaming) line.command = streamed_dirs_line(state.stages, jn.env.runner) + line.command;
  request.command = command_for(jn.ready.node, line.command);
  net::buffer_source env_input(line.input);
  if (!line.input.empty()) request.input = &env_input;
  stderr_tail tail(output);
  request.output = &tail;
  auto done = co_await jn.ready.link->exec(task, request, result.diag);
  output.flush();
  if (streaming) {
    co_await stop_stager(streamer);
    // A stream cut short because the command ended first is the command's business; a failed one is not.
    if (streamer.error && streamer.error != asio::error::operation_aborted && done && done->success()) {
      result.error = streamer.error;
      result.diag = streamer.diag;
      task.fail(result.error, result.diag);
      co_return;
    }
  }
  state.ran = std::max(state.ran, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  state.on_work_ended();
  if (!done) {
    result.error = done.error();
    task.fail(result.error, result.diag);
    co_return;
  }
  result.code = exit_code_of(*done);
  if (const auto last = last_lines(tail.text(), 1); !last.empty()) result.last_err = last.front();
  if (result.code == 0) {
    task.succeed({{"exit_code", 0}});
  } else {
    task.fail_exception("exit", fmt::format("exit code {}", result.code));
    auto hint = co_await ignored_hint(*state.ctx, tail.text(), jn.env.workdir);
    if (hint && state.hints.insert(*hint).second) fmt::print(stderr, "ferry: hint: {}\n", *hint);
  }
}

int final_code(const run_state& state, const std::vector<std::string>& failures) {
  int code = exit_code::success;
  for (const auto& f : failures) print_error(f);
  if (!failures.empty()) code = exit_code::failure;
  for (const auto& r : state.results) {
    if (r.error) {
      print_error(fmt::format("{}: {}", r.node, describe(r.error, r.diag)));
      if (code == exit_code::success) code = exit_code::failure;
    } else if (r.code != 0 && code == exit_code::success) {
      code = r.code;
    }
  }
  return code;
}

// With several nodes, their output mixed above: one line per node whose command failed, at the very end.
void print_failed_nodes(const run_state& state) {
  for (const auto& r : state.results) {
    if (!r.error && r.code != 0)
      fmt::print(stderr, "ferry: {}\n", node_failure_line(r.name, r.code, r.last_err));
  }
}

asio::awaitable<int> run(command_context& ctx, const run_args& args) {
  auto& act = ctx.trace;
  if (args.command.empty()) {
    print_error("give the command to run after --, e.g. ferry run -- python train.py");
    co_return exit_code::usage;
  }
  run_state state{args};
  if (std::string why; !parse_env_vars(args.env, state.vars, why)) {
    print_error(why);
    co_return exit_code::usage;
  }
  std::uint64_t window = 0;
  if (!args.stage_window.empty()) {
    const auto w = config::parse_byte_size(args.stage_window);
    if (!w || w->bytes == 0 || args.stages.empty()) {
      print_error(fmt::format("--stage-window {}: give a size such as 512MiB, with --stage", args.stage_window));
      co_return exit_code::usage;
    }
    window = w->bytes;
  }
  if (!args.stage_order.empty() && args.stages.empty()) {
    print_error(fmt::format("--stage-order {} needs a --stage", args.stage_order));
    co_return exit_code::usage;
  }
  std::vector<stage_spec> specs;
  for (const auto& text : args.stages) {
    diagnostics d;
    auto spec = parse_stage_spec(text, d);
    if (!spec) {
      print_error(d.message);
      co_return exit_code::usage;
    }
    specs.push_back(std::move(*spec));
  }
  const auto count = static_cast<std::size_t>(args.nodes > 0 ? args.nodes : ctx.config.values.nodes.count);
  state.prefixed = count > 1;
  act.log(action_types::run::command, {{"command", net::quote_argv(args.command)}, {"nodes", count}});

  diagnostics diag;
  job j(ctx, act);
  if (auto opened = j.open("", diag); !opened) co_return report(act, opened.error(), diag);
  j.lazy_start(ctx.config.values.agent.lazy_start && runs_python(args.command));
  j.check_python(python_program(args.command));
  state.on_first_output = [&j] { j.first_output(); };
  state.on_work_ended = [&j] { j.work_ended(); };
  state.ctx = &ctx;
  state.staging = stage_options::from(ctx.config.values);
  state.staging.program = j.node_options().program;
  state.staging.cache_dir = j.node_options().cache_dir;
  state.staging.node_path = j.node_options().node_path;
  for (const auto& spec : specs) {
    auto plan = co_await plan_stage(act, j.storage(), spec, window, diag);
    if (!plan) co_return report(act, plan.error(), diag);
    if (!args.stage_order.empty()) {
      auto text = read_order_file(args.stage_order, diag);
      if (!text) co_return report(act, text.error(), diag);
      if (auto ordered = order_stage(*plan, spec.prefix, *text, args.stage_order, diag); !ordered) {
        co_return report(act, ordered.error(), diag);
      }
    }
    state.stages.push_back(std::move(*plan));
  }
  auto work = [&act, &state](job_node& jn) { return run_on(act, jn, state); };
  auto ran = co_await j.run(count, work, diag);
  if (co_await net::cancelled()) co_return report(act, asio::error::operation_aborted, diag);
  if (!ran) co_return report(act, ran.error(), diag);
  const int code = final_code(state, j.failures());
  if (ctx.options.verbosity >= 0) fmt::print(stderr, "ferry: {}\n", startup_line(j.times(), state.ran, j.since_start()));
  if (state.prefixed) print_failed_nodes(state);
  co_return code;
}

}  // namespace

void add_run_command(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<run_args>();
  auto provider = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("run", "run a command on nodes with the project and its Python path in place");
  cmd->add_option("--nodes", args->nodes, "how many nodes (nodes.count)")->check(CLI::Range(1, config::max_node_count));
  cmd->add_option("--provider", *provider, "local, ssh or ec2 (nodes.provider)");
  cmd->add_option("--env", args->env, "set NAME=VALUE in the command's environment; NAME alone passes on the value it has here "
                  "(repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--stage", args->stages,
                  "copy the objects under s3://BUCKET/PREFIX to NODE_DIR on each node first (s3://B/P=NODE_DIR)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--stage-window", args->stage_window,
                  "stream the staged objects alongside the command, at most this many unread bytes at once");
  cmd->add_option("--stage-order", args->stage_order,
                  "a file naming the staged objects (keys or paths under the prefix), one per line, in the order "
                  "to deliver them; the rest follow in listing order");
  cmd->footer("  ferry run [--nodes N] [--env K=V]... [--stage s3://B/P=DIR [--stage-window SIZE]] -- CMD ARGS...");
  cmd->callback([&selected, args, provider] {
    selected.action_type = action_types::run::job;
    selected.takes_command = true;
    if (!provider->empty()) selected.config_flags.push_back({"nodes.provider", *provider, "--provider"});
    selected.run = [args](command_context& ctx) {
      args->command = ctx.options.command;
      return run(ctx, *args);
    };
  });
}

}  // namespace ferry::agent
