// `ferry run [--nodes N] [--provider P] [--env K=V]... -- CMD ARGS...`: the project packed and shipped
// while nodes are provided, its layers materialised on each node, then CMD run there in the workspace
// with the project's Python path. Output streams back (prefixed by node when there are several); the
// exit code is the command's (128 + N for a signal N), or the first failing node's. Ctrl-C kills the
// remote process groups, aborts uploads and exits 130. The last line on stderr says where the start-up
// time went.
#include "agent/commands/command.hpp"

#include "agent/exit_code.hpp"
#include "agent/job.hpp"
#include "agent/node_output.hpp"
#include "agent/node_watchdog.hpp"
#include "agent/task_command.hpp"
#include "agent/task_outcome.hpp"
#include "net/cancellation.hpp"
#include "net/ssh_exec.hpp"
#include "net/ssh_quote.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;

struct run_args {
  int nodes = 0;  // 0: nodes.count
  std::vector<std::string> env;
  std::vector<std::string> command;
};

int report(tracing::action& act, const error_code& ec, const diagnostics& diag) {
  act.fail(ec, diag);
  fmt::print(stderr, "ferry: error: {}\n", describe(ec, diag));
  return ec == asio::error::operation_aborted ? exit_code::interrupted : exit_code::failure;
}

struct node_result {
  std::string node;
  int code = exit_code::failure;
  error_code error;
  diagnostics diag;
};

struct run_state {
  const run_args& args;
  env_vars vars;
  bool prefixed = false;
  std::deque<node_result> results;  // grows while other nodes hold references to their own entries
  std::chrono::steady_clock::time_point first_start{};
  double ran = 0;
};

asio::awaitable<void> run_on(tracing::action& job_act, job_node& jn, run_state& state) {
  const auto start = std::chrono::steady_clock::now();
  if (state.first_start == std::chrono::steady_clock::time_point{}) state.first_start = start;
  auto& result = state.results.emplace_back();
  result.node = jn.ready.node.id;
  auto task = job_act.child("ferry:agent:task", {{"node", jn.ready.node.id},
                                                  {"submitted_at", unix_now()},
                                                  {"command", net::quote_argv(state.args.command)}});
  node_output output(state.prefixed ? fmt::format("{} | ", jn.ready.node.name) : std::string());
  net::exec_request request;
  request.command =
      command_for(jn.ready.node, task_command(jn.env, task.hand_off_task_id(), state.vars, state.args.command));
  request.output = &output;
  auto done = co_await net::exec(task, *jn.ready.session, request, result.diag);
  output.flush();
  state.ran = std::max(state.ran, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!done) {
    result.error = done.error();
    task.fail(result.error, result.diag);
    co_return;
  }
  result.code = exit_code_of(*done);
  if (result.code == 0) {
    task.succeed({{"exit_code", 0}});
  } else {
    task.fail_exception("exit", fmt::format("exit code {}", result.code));
  }
}

int final_code(const run_state& state, const std::vector<std::string>& failures) {
  int code = exit_code::success;
  for (const auto& f : failures) fmt::print(stderr, "ferry: error: {}\n", f);
  if (!failures.empty()) code = exit_code::failure;
  for (const auto& r : state.results) {
    if (r.error) {
      fmt::print(stderr, "ferry: error: {}: {}\n", r.node, describe(r.error, r.diag));
      if (code == exit_code::success) code = exit_code::failure;
    } else if (r.code != 0 && code == exit_code::success) {
      code = r.code;
    }
  }
  return code;
}

asio::awaitable<int> run(command_context& ctx, const run_args& args) {
  auto& act = ctx.trace;
  if (args.command.empty()) {
    fmt::print(stderr, "ferry: error: give the command to run after --, e.g. ferry run -- python train.py\n");
    co_return exit_code::usage;
  }
  run_state state{args};
  for (const auto& e : args.env) {
    std::pair<std::string, std::string> kv;
    std::string why;
    if (!parse_env_var(e, kv, why)) {
      fmt::print(stderr, "ferry: error: {}\n", why);
      co_return exit_code::usage;
    }
    state.vars.push_back(std::move(kv));
  }
  const auto count = static_cast<std::size_t>(args.nodes > 0 ? args.nodes : ctx.config.values.nodes.count);
  state.prefixed = count > 1;
  act.log("ferry:run:command", {{"command", net::quote_argv(args.command)}, {"nodes", count}});

  diagnostics diag;
  job j(ctx, act);
  if (auto opened = j.open("", diag); !opened) co_return report(act, opened.error(), diag);
  auto work = [&act, &state](job_node& jn) { return run_on(act, jn, state); };
  auto ran = co_await j.run(count, work, diag);
  if (co_await net::cancelled()) co_return report(act, asio::error::operation_aborted, diag);
  if (!ran) co_return report(act, ran.error(), diag);
  const int code = final_code(state, j.failures());
  if (ctx.options.verbosity >= 0) fmt::print(stderr, "ferry: {}\n", startup_line(j.times(), state.ran));
  co_return code;
}

}  // namespace

void add_run_command(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<run_args>();
  auto provider = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("run", "run a command on nodes with the project and its Python path in place");
  cmd->add_option("--nodes", args->nodes, "how many nodes (nodes.count)")->check(CLI::Range(1, 1000));
  cmd->add_option("--provider", *provider, "local, ssh or ec2 (nodes.provider)");
  cmd->add_option("--env", args->env, "set NAME=VALUE in the command's environment (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->prefix_command();
  cmd->allow_extras();
  cmd->footer("  ferry run [--nodes N] [--env K=V]... -- CMD ARGS...");
  cmd->callback([&selected, args, provider, cmd] {
    args->command = cmd->remaining();
    selected.action_type = "ferry:run";
    selected.takes_command = true;
    if (!provider->empty()) selected.config_flags.push_back({"nodes.provider", *provider, "--provider"});
    selected.run = [args](command_context& ctx) {
      if (args->command.empty()) args->command = ctx.options.command;
      return run(ctx, *args);
    };
  });
}

}  // namespace ferry::agent
