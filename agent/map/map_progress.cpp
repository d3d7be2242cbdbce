#include "agent/map/map_progress.hpp"

#include <fmt/format.h>

#include <cmath>

namespace ferry::agent {

std::string eta_text(double seconds) {
  const auto s = static_cast<long long>(std::ceil(std::max(0.0, seconds)));
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} m {:02} s", s / 60, s % 60);
  return fmt::format("{} h {:02} m", s / 3600, (s % 3600) / 60);
}

std::string map_progress_line(const map_counts& c, std::optional<double> working) {
  auto line = fmt::format("map  {} / {} done, {} failed, {} retried", c.done, c.total, c.failed, c.retried);
  const auto finished = c.done + c.failed;
  if (!working) return line + "  starting";
  if (finished == 0 || *working <= 0) return line;
  const double rate = static_cast<double>(finished) / *working;
  line += fmt::format("  {:.1f} tasks/s", rate);
  if (finished < c.total) line += "  ETA " + eta_text(static_cast<double>(c.total - finished) / rate);
  return line;
}

}  // namespace ferry::agent
