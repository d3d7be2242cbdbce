#include "agent/commands/command.hpp"

#include "agent/cli/report.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/cli/json_output.hpp"
#include "agent/cli/trace_input.hpp"
#include "net/atomic_file.hpp"
#include "tracing/action_types.hpp"
#include "tracing/chrome_view.hpp"
#include "tracing/html_view.hpp"
#include "tracing/otlp_view.hpp"
#include "tracing/stats_view.hpp"
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
  bool json = false;
  bool all = false;  // tree: fold no repeated subtrees
};

boost::asio::awaitable<int> tree(command_context& ctx, const trace_args& args) {
  diagnostics diag;
  auto set = co_await read_trace_input(ctx, args.files, diag);
  if (!set) co_return exit_code::failure;
  const auto tasks = tracing::build_task_trees(*set);
  fmt::print("{}", tracing::render_tree(tasks, {.color = ctx.interactive, .all = args.all}));
  co_return exit_code::success;
}

// Writes `text` to a temporary file renamed into place: never a half-written output under the final name.
bool write_output(const std::string& path, std::string_view text) {
  diagnostics diag;
  if (auto written = net::write_file_atomically(path, text, diag, {.mode = 0644, .make_parent = false}); !written) {
    print_error(diag.message);
    return false;
  }
  return true;
}

boost::asio::awaitable<int> chrome(command_context& ctx, const trace_args& args) {
  diagnostics diag;
  auto set = co_await read_trace_input(ctx, args.files, diag);
  if (!set) co_return exit_code::failure;
  const auto json = boost::json::serialize(tracing::render_chrome(*set, tracing::build_task_trees(*set)));
  co_return write_output(args.output, json) ? exit_code::success : exit_code::failure;
}

boost::asio::awaitable<int> stats(command_context& ctx, const trace_args& args) {
  diagnostics diag;
  auto set = co_await read_trace_input(ctx, args.files, diag);
  if (!set) co_return exit_code::failure;
  auto act = ctx.trace.child(action_types::trace::stats);
  const auto s =
      co_await net::offload(ctx.cpu, [&] { return tracing::compute_stats(*set, tracing::build_task_trees(*set)); });
  act.succeed({{"jobs", static_cast<std::uint64_t>(s.jobs.size())}});
  if (args.json)
    fmt::print("{}\n", json_line(tracing::stats_to_json(s)));
  else
    fmt::print("{}", tracing::render_stats(s));
  co_return exit_code::success;
}

boost::asio::awaitable<int> html(command_context& ctx, const trace_args& args) {
  diagnostics diag;
  auto set = co_await read_trace_input(ctx, args.files, diag);
  if (!set) co_return exit_code::failure;
  auto act = ctx.trace.child(action_types::trace::html);
  const auto page = co_await net::offload(ctx.cpu, [&] {
    const auto tasks = tracing::build_task_trees(*set);
    return tracing::render_html(*set, tasks, tracing::compute_stats(*set, tasks));
  });
  act.succeed({{"bytes", static_cast<std::uint64_t>(page.size())}});
  co_return write_output(args.output, page) ? exit_code::success : exit_code::failure;
}

// One ExportTraceServiceRequest per line (tracing/otlp_view.hpp says how the lines are cut).
boost::asio::awaitable<int> otlp(command_context& ctx, const trace_args& args) {
  diagnostics diag;
  auto set = co_await read_trace_input(ctx, args.files, diag);
  if (!set) co_return exit_code::failure;
  auto act = ctx.trace.child(action_types::trace::otlp);
  const auto out =
      co_await net::offload(ctx.cpu, [&] { return tracing::render_otlp(*set, tracing::build_task_trees(*set)); });
  act.succeed({{"spans", static_cast<std::uint64_t>(out.spans)},
               {"events", static_cast<std::uint64_t>(out.events)},
               {"lines", static_cast<std::uint64_t>(out.lines.size())},
               {"left_out_messages", static_cast<std::uint64_t>(out.left_out_messages)}});
  std::string text;
  for (const auto& line : out.lines) (text += line) += '\n';
  co_return write_output(args.output, text) ? exit_code::success : exit_code::failure;
}

}  // namespace

void add_trace_commands(CLI::App& app, selected_command& selected) {
  constexpr auto files_help = "trace files (JSON lines) or directories of them; none: the last command's trace";
  auto args = std::make_shared<trace_args>();
  auto* trace = app.add_subcommand("trace", "read traces: trees, timelines and statistics");
  trace->fallthrough();
  trace->require_subcommand(1);

  auto* tree_cmd = trace->add_subcommand("tree", "print traces as trees of actions, merging files of several processes");
  tree_cmd->fallthrough();
  tree_cmd->add_option("files", args->files, files_help);
  tree_cmd->add_flag("--all", args->all, "draw every action: fold no repeated siblings of one action type");
  tree_cmd->callback([&selected, args] {
    selected.action_type = action_types::trace::tree;
    selected.run = [args](command_context& ctx) { return tree(ctx, *args); };
  });

  auto* chrome_cmd = trace->add_subcommand("chrome", "write Chrome trace-event JSON (open it in Perfetto)");
  chrome_cmd->fallthrough();
  chrome_cmd->add_option("files", args->files, files_help);
  chrome_cmd->add_option("-o,--output", args->output, "the JSON file to write")->required();
  chrome_cmd->callback([&selected, args] {
    selected.action_type = action_types::trace::chrome;
    selected.run = [args](command_context& ctx) { return chrome(ctx, *args); };
  });

  auto* stats_cmd = trace->add_subcommand(
      "stats", "per action type counts and durations; per run and map pending times, node utilisation and critical path");
  stats_cmd->fallthrough();
  stats_cmd->add_option("files", args->files, files_help);
  stats_cmd->add_flag("--json", args->json, "print every figure as JSON");
  stats_cmd->callback([&selected, args] {
    selected.action_type = action_types::trace::stats;
    selected.run = [args](command_context& ctx) { return stats(ctx, *args); };
  });

  auto* html_cmd = trace->add_subcommand("html", "write a self-contained HTML timeline with the statistics");
  html_cmd->fallthrough();
  html_cmd->add_option("files", args->files, files_help);
  html_cmd->add_option("-o,--output", args->output, "the HTML file to write")->required();
  html_cmd->callback([&selected, args] {
    selected.action_type = action_types::trace::html;
    selected.run = [args](command_context& ctx) { return html(ctx, *args); };
  });

  auto* otlp_cmd = trace->add_subcommand(
      "otlp", "write OTLP/JSON, one ExportTraceServiceRequest per line (for an OpenTelemetry collector)");
  otlp_cmd->fallthrough();
  otlp_cmd->add_option("files", args->files, files_help);
  otlp_cmd->add_option("-o,--output", args->output, "the JSON-lines file to write")->required();
  otlp_cmd->callback([&selected, args] {
    selected.action_type = action_types::trace::otlp;
    selected.run = [args](command_context& ctx) { return otlp(ctx, *args); };
  });
}

}  // namespace ferry::agent
