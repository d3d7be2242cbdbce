#pragma once
// The line a map shows on a terminal while it runs (agent/cli/progress_bar.hpp draws it): tasks done of all,
// failed, retried, the rate and the time left at that rate.
#include <cstddef>
#include <optional>
#include <string>

namespace ferry::agent {

struct map_counts {
  std::size_t total = 0, done = 0, failed = 0, retried = 0;
};

// `working` is the seconds since the first task began (none yet: none has). The rate counts finished
// tasks (done or failed) over that time; the ETA is the tasks left at that rate.
// "map  40 / 100 done, 1 failed, 2 retried  12.5 tasks/s  ETA 5 s"
std::string map_progress_line(const map_counts& c, std::optional<double> working);

// "5 s", "2 m 05 s", "1 h 02 m": a time left, to the second.
std::string eta_text(double seconds);

}  // namespace ferry::agent
