// `ferry exec [--nodes ...] -- CMD ARGS...`: one command on every chosen node at once, over ferry's own
// SSH sessions. Output is streamed (prefixed by node name when there are several nodes); the exit code is
// the command's own (128 + N when a signal N ended it), or the first failing node's. Ctrl-C kills the
// remote process groups, then ferry exits with 130.
#include "agent/commands/command.hpp"

#include "agent/cli/report.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/provide/node_access.hpp"
#include "agent/run/node_output.hpp"
#include "agent/provide/node_watchdog.hpp"
#include "agent/run/task_outcome.hpp"
#include "net/cancellation.hpp"
#include "net/run_all.hpp"
#include "net/node_link.hpp"
#include "net/shell_quote.hpp"
#include "provision/error.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;

struct exec_args {
  std::vector<std::string> nodes;  // ids or names; none: every running node
  std::vector<std::string> command;
};

result<std::vector<provision::node>> chosen_nodes(const node_access& access, const exec_args& args,
                                                  diagnostics& diag) {
  auto all = access.registry.load(diag);
  if (!all) return all.error();
  std::vector<provision::node> out;
  if (args.nodes.empty()) {
    for (auto& n : *all) {
      if (n.state == provision::node_state::running) out.push_back(n);
    }
    if (out.empty()) {
      diag.set("no running nodes: start some with `ferry nodes up N`");
      return error_code(provision::errc::node_not_found);
    }
    return out;
  }
  for (const auto& name : args.nodes) {
    auto it = std::find_if(all->begin(), all->end(),
                           [&](const provision::node& n) { return n.id == name || n.name == name; });
    if (it == all->end()) {
      diag.set(fmt::format("no node {} in {} (see `ferry nodes ls`)", name, access.registry.file().string()));
      return error_code(provision::errc::node_not_found);
    }
    out.push_back(*it);
  }
  return out;
}

struct node_run {
  provision::node node;
  int code = exit_code::failure;
  error_code error;
  diagnostics diag;
  bool unreachable = false;  // no link to it
};

asio::awaitable<void> run_on(tracing::action& parent, const node_access& access, std::string command,
                             std::string prefix, node_run& run) {
  co_await net::accept_cancellation();
  auto act = parent.child(action_types::exec::node, {{"node", run.node.id}});
  auto link = co_await connect_node(act, run.node, access, run.diag);
  if (!link) {
    run.error = link.error();
    run.unreachable = true;
    act.fail(run.error, run.diag);
    co_return;
  }
  node_output output(std::move(prefix));
  net::exec_request request;
  request.command = command_for(run.node, command);
  request.output = &output;
  auto done = co_await (*link)->exec(act, request, run.diag);
  output.flush();
  (*link)->close();
  if (!done) {
    run.error = done.error();
    act.fail(run.error, run.diag);
    co_return;
  }
  run.code = exit_code_of(*done);
  act.succeed({{"exit_code", run.code}});
}

// A node that cannot be reached may have stopped itself when idle, or ended: its provider says which.
asio::awaitable<void> explain_unreachable(tracing::action& act, command_context& ctx, const node_access& access,
                                          node_run& run) {
  diagnostics d;
  auto provider = provider_named(ctx, access, run.node.provider, d);
  if (!provider) co_return;
  auto now = co_await (*provider)->describe(act, run.node, d);
  if (!now || now->state == provision::node_state::running) co_return;
  const auto* why = now->details.if_contains("state_reason");
  const auto reason = why && why->is_string() ? fmt::format(": {}", std::string_view(why->get_string())) : "";
  run.diag.set(fmt::format("{}; node {} ({}) is {}{} (`ferry nodes down {}` removes it)", describe(run.error, run.diag),
                           run.node.name, run.node.id, provision::to_string(now->state), reason, run.node.name));
}

asio::awaitable<int> exec(command_context& ctx, const exec_args& args) {
  if (args.command.empty()) {
    print_error("give the command to run after --, e.g. ferry exec -- python3 -V");
    co_return exit_code::usage;
  }
  const auto command = net::quote_argv(args.command);
  auto act = ctx.trace.child(action_types::exec::command, {{"command", command}});
  diagnostics diag;
  auto access = open_node_access(ctx, diag);
  if (!access) co_return report(act, access.error(), diag);
  auto nodes = chosen_nodes(*access, args, diag);
  if (!nodes) co_return report(act, nodes.error(), diag);
  std::vector<node_run> runs(nodes->size());
  std::vector<asio::awaitable<void>> tasks;
  const std::size_t width = std::max_element(nodes->begin(), nodes->end(), [](const auto& a, const auto& b) {
                              return a.name.size() < b.name.size();
                            })->name.size();
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    runs[i].node = (*nodes)[i];
    auto prefix = nodes->size() > 1 ? fmt::format("{:<{}} | ", runs[i].node.name, width) : std::string();
    tasks.push_back(run_on(act, *access, command, std::move(prefix), runs[i]));
  }
  co_await net::run_all(std::move(tasks));
  if (const bool interrupted = co_await net::cancelled(); !interrupted) {
    for (auto& r : runs) {
      if (r.unreachable) co_await explain_unreachable(act, ctx, *access, r);
    }
  }
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  for (auto& r : runs) {
    r.node.last_used_at = now;
    diagnostics d;
    (void)co_await access->registry.update(act, r.node, d);
  }
  if (co_await net::cancelled()) co_return report(act, asio::error::operation_aborted, diag);
  int code = exit_code::success;
  for (const auto& r : runs) {
    if (r.error) {
      print_error(describe(r.error, r.diag));
      if (code == exit_code::success) code = exit_code::failure;
    } else if (r.code != 0 && code == exit_code::success) {
      code = r.code;
    }
  }
  if (code == exit_code::success) {
    act.succeed({{"nodes", runs.size()}});
  } else {
    act.fail_exception("exit", fmt::format("exit code {}", code));
  }
  co_return code;
}

}  // namespace

void add_exec_command(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<exec_args>();
  auto* cmd = app.add_subcommand("exec", "run a command on nodes, streaming its output");
  // One value per flag (split at commas, repeatable), so that `--` after it still starts the command.
  cmd->add_option("--nodes", args->nodes, "node ids or names, comma-separated (default: every running node)")
      ->delimiter(',')
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->footer("  ferry exec [--nodes N1,N2] -- CMD ARGS...");
  cmd->callback([&selected, args] {
    selected.action_type = action_types::exec::command;
    selected.takes_command = true;
    selected.run = [args](command_context& ctx) {
      args->command = ctx.options.command;
      return exec(ctx, *args);
    };
  });
}

}  // namespace ferry::agent
