#include "agent/cli/trace_input.hpp"

#include "agent/cli/plural.hpp"
#include "agent/cli/report.hpp"
#include "config/xdg.hpp"
#include "net/offload.hpp"
#include "tracing/action_types.hpp"
#include "tracing/last_trace.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace ferry::agent {
namespace {

// No file named: the last command's trace (tracing/last_trace.hpp) in the directory where every command
// writes its own (agent/cli/cli.cpp). Said on stderr, so that the user knows which run the view shows.
void say_what_was_taken(const tracing::last_trace& last) {
  const auto more = last.files.size() - 1;
  fmt::print(stderr, "ferry: reading the last command's trace ({}): {}{}\n", last.action_type, last.file.string(),
             more == 0 ? std::string() : fmt::format(" and {} of its task", counted(more, "more file", "more files")));
}

}  // namespace

boost::asio::awaitable<result<tracing::trace_set>> read_trace_input(command_context& ctx,
                                                                    const std::vector<std::string>& files,
                                                                    diagnostics& diag) {
  auto act = ctx.trace.child(action_types::trace::read, {{"files", static_cast<std::uint64_t>(files.size())}});
  std::vector<std::filesystem::path> paths(files.begin(), files.end());
  if (paths.empty()) {
    const auto dir = config::xdg_paths(config::process_env()).state / "traces";  // as agent/cli/cli.cpp's trace_path
    auto last = co_await net::offload(ctx.cpu,
                                      [&] { return tracing::find_last_trace(dir, action_types::trace::prefix, diag); });
    if (!last) {
      act.fail(last.error(), diag);
      print_error(diag.message);
      co_return last.error();
    }
    say_what_was_taken(*last);
    paths = std::move(last->files);
  }
  auto set = co_await net::offload(ctx.cpu, [&] { return tracing::read_traces(paths, diag); });
  if (set) {
    for (const auto& p : set->problems) print_error(p);
    act.succeed({{"messages", static_cast<std::uint64_t>(set->messages.size())},
                 {"skipped_lines", static_cast<std::uint64_t>(set->problems.size())}});
  } else {
    act.fail(set.error(), diag);
    print_error(diag.message);
  }
  co_return set;
}

}  // namespace ferry::agent
