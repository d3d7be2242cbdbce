#include "agent/run/run_summary.hpp"

#include "agent/cli/plural.hpp"

#include <fmt/format.h>

namespace ferry::agent {

std::string node_failure_line(std::string_view node, int exit_code, std::string_view last_err) {
  return last_err.empty() ? fmt::format("{} failed: exit code {}", node, exit_code)
                          : fmt::format("{} failed: exit code {}: {}", node, exit_code, last_err);
}

map_tally tally_of(const map_schedule& s) {
  map_tally t;
  t.total = s.tasks().size();
  for (const auto& task : s.tasks()) {
    switch (task.now) {
      case map_task::state::done: ++t.done; break;
      case map_task::state::failed: ++t.failed; break;
      case map_task::state::running: ++t.cut_short; break;
      case map_task::state::waiting: ++t.not_run; break;
    }
  }
  return t;
}

std::string interrupted_map_line(const map_tally& t) {
  return fmt::format("{}: {} done, {} failed, {} cut short, {} not run", counted(t.total, "task"), t.done, t.failed,
                     t.cut_short, t.not_run);
}

}  // namespace ferry::agent
