#pragma once
// What a run or a map says at its end about what did not go well: a line per node whose command failed
// (its exit code and the last line it wrote on stderr), and for a map stopped by Ctrl-C, how far it got.
#include "agent/map/map_schedule.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace ferry::agent {

// "node-2 failed: exit code 3: ValueError: no such input" (no stderr: ends after the exit code).
std::string node_failure_line(std::string_view node, int exit_code, std::string_view last_err);

// How far a map got, task by task.
struct map_tally {
  std::size_t total = 0, done = 0, failed = 0;
  std::size_t cut_short = 0;  // running when the map stopped
  std::size_t not_run = 0;    // still waiting
};
map_tally tally_of(const map_schedule& s);

// "40 tasks: 2 done, 0 failed, 1 cut short, 37 not run"
std::string interrupted_map_line(const map_tally& t);

}  // namespace ferry::agent
