#include "agent/commands/command.hpp"

#include "agent/exit_code.hpp"
#include "tracing/chrome_view.hpp"
#include "tracing/tree_view.hpp"

#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <fstream>
#include <memory>

namespace ferry::agent {
namespace {

struct trace_args {
  std::vector<std::string> files;
  std::string output;
};

// Reads the files on the CPU pool; prints skipped lines as errors naming file:line, and any failure.
boost::asio::awaitable<result<tracing::trace_set>> read_on_pool(command_context& ctx, const trace_args& args,
                                                                diagnostics& diag) {
  auto act = ctx.trace.child("ferry:trace:read", {{"files", static_cast<std::uint64_t>(args.files.size())}});
  std::vector<std::filesystem::path> paths(args.files.begin(), args.files.end());
  auto set = co_await net::offload(ctx.cpu, [&] { return tracing::read_traces(paths, diag); });
  if (set) {
    for (const auto& p : set->problems) fmt::print(stderr, "ferry: error: {}\n", p);
    act.succeed({{"messages", static_cast<std::uint64_t>(set->messages.size())},
                 {"skipped_lines", static_cast<std::uint64_t>(set->problems.size())}});
  } else {
    act.fail(set.error(), diag);
    fmt::print(stderr, "ferry: error: {}\n", diag.message);
  }
  co_return set;
}

boost::asio::awaitable<int> tree(command_context& ctx, const trace_args& args) {
  diagnostics diag;
  auto set = co_await read_on_pool(ctx, args, diag);
  if (!set) co_return exit_code::failure;
  const auto tasks = tracing::build_task_trees(*set);
  fmt::print("{}", tracing::render_tree(tasks, {.color = ctx.interactive}));
  co_return exit_code::success;
}

boost::asio::awaitable<int> chrome(command_context& ctx, const trace_args& args) {
  diagnostics diag;
  auto set = co_await read_on_pool(ctx, args, diag);
  if (!set) co_return exit_code::failure;
  const auto json = boost::json::serialize(tracing::render_chrome(*set, tracing::build_task_trees(*set)));
  const auto tmp = args.output + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << json;
    if (!out.flush()) {
      fmt::print(stderr, "ferry: error: cannot write {}\n", tmp);
      co_return exit_code::failure;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, args.output, ec);  // never a half-written output under the final name
  if (ec) {
    fmt::print(stderr, "ferry: error: cannot write {}: {}\n", args.output, ec.message());
    co_return exit_code::failure;
  }
  co_return exit_code::success;
}

}  // namespace

void add_trace_commands(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<trace_args>();
  auto* trace = app.add_subcommand("trace", "Read traces: trees and timelines");
  trace->fallthrough();
  trace->require_subcommand(1);

  auto* tree_cmd = trace->add_subcommand("tree", "Print traces as trees of actions, merging files of several processes");
  tree_cmd->fallthrough();
  tree_cmd->add_option("files", args->files, "trace files (JSON lines) or directories of them")->required();
  tree_cmd->callback([&selected, args] {
    selected.action_type = "ferry:trace:tree";
    selected.run = [args](command_context& ctx) { return tree(ctx, *args); };
  });

  auto* chrome_cmd = trace->add_subcommand("chrome", "Write Chrome trace-event JSON (open it in Perfetto)");
  chrome_cmd->fallthrough();
  chrome_cmd->add_option("files", args->files, "trace files (JSON lines) or directories of them")->required();
  chrome_cmd->add_option("-o,--output", args->output, "the JSON file to write")->required();
  chrome_cmd->callback([&selected, args] {
    selected.action_type = "ferry:trace:chrome";
    selected.run = [args](command_context& ctx) { return chrome(ctx, *args); };
  });
}

}  // namespace ferry::agent
