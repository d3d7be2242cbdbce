// `ferry warmup [--nodes N]`: the current project packed and its layers materialised on the warm nodes
// (every running node of the provider, and at least nodes.min_nodes), so the next run starts at once.
#include "agent/commands/command.hpp"

#include "agent/cli/report.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/job/job.hpp"
#include "agent/cli/plural.hpp"
#include "net/cancellation.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;

struct warmup_args {
  int nodes = 0;
};

// Every running node of the configured provider, and nodes.min_nodes at least (one at least).
std::size_t warm_count(const command_context& ctx, const warmup_args& args) {
  if (args.nodes > 0) return static_cast<std::size_t>(args.nodes);
  const auto& s = ctx.config.values;
  std::size_t running = 0;
  diagnostics d;
  if (auto access = open_node_access(ctx, d)) {
    if (auto nodes = access->registry.load(d)) {
      running = static_cast<std::size_t>(std::count_if(nodes->begin(), nodes->end(), [&](const provision::node& n) {
        return n.provider == s.nodes.provider && n.state == provision::node_state::running;
      }));
    }
  }
  return std::max<std::size_t>({1, running, static_cast<std::size_t>(std::max(0, s.nodes.min_nodes))});
}

asio::awaitable<int> warmup(command_context& ctx, const warmup_args& args) {
  auto& act = ctx.trace;
  diagnostics diag;
  const auto count = warm_count(ctx, args);
  job j(ctx, act);
  if (auto opened = j.open("", diag); !opened) co_return report(act, opened.error(), diag);
  std::vector<std::string> warmed;
  auto work = [&warmed](job_node& jn) -> asio::awaitable<void> {
    warmed.push_back(jn.ready.node.name);
    co_return;
  };
  auto ran = co_await j.run(count, work, diag);
  if (co_await net::cancelled()) co_return report(act, asio::error::operation_aborted, diag);
  if (!ran) co_return report(act, ran.error(), diag);
  for (const auto& f : j.failures()) print_error(f);
  const auto& t = j.times();
  fmt::print("warmed {} ({}): {}, {} fetched\n", counted(warmed.size(), "node"), fmt::join(warmed, ", "),
             counted(t.layers, "layer"), t.layers_fetched);
  if (ctx.options.verbosity >= 0) fmt::print(stderr, "ferry: {}\n", startup_line(t, 0, j.since_start()));
  co_return j.failures().empty() ? exit_code::success : exit_code::failure;
}

}  // namespace

void add_warmup_command(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<warmup_args>();
  auto* cmd = app.add_subcommand("warmup", "pack the project and put its layers on the warm nodes ahead of a run");
  cmd->add_option("--nodes", args->nodes, "how many nodes (default: every running one, at least nodes.min_nodes)")
      ->check(CLI::Range(1, config::max_node_count));
  cmd->callback([&selected, args] {
    selected.action_type = action_types::cli::warmup;
    selected.run = [args](command_context& ctx) { return warmup(ctx, *args); };
  });
}

}  // namespace ferry::agent
