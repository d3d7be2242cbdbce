#include "agent/map/map_growth.hpp"

#include "agent/cli/plural.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ferry::agent {

map_growth growth_of(const map_pace& p) {
  map_growth g;
  if (p.waiting == 0 || p.task_seconds <= 0 || p.nodes == 0 || p.per_node == 0) return g;
  const double slots = static_cast<double>(p.nodes * p.per_node);
  // The waiting tasks start in rounds of `slots`; the last one starts after all the rounds before it.
  g.wait_seconds = std::ceil(static_cast<double>(p.waiting) / slots) * p.task_seconds;
  if (g.wait_seconds <= p.node_seconds || p.nodes >= p.max_nodes) return g;
  // Enough nodes that the waiting work, spread over all of them, takes about one node's start.
  const double work = static_cast<double>(p.waiting) * p.task_seconds;
  const double per_node_share = std::max(p.node_seconds, p.task_seconds) * static_cast<double>(p.per_node);
  const auto wanted = static_cast<std::size_t>(std::ceil(work / per_node_share));
  const auto useful = (p.waiting + p.per_node - 1) / p.per_node;  // beyond this, a node would get no task
  const auto target = std::min({wanted, p.max_nodes, p.nodes + useful});
  g.add = target > p.nodes ? target - p.nodes : 0;
  return g;
}

std::string growth_line(const map_pace& p, const map_growth& g) {
  return fmt::format("{} would wait {:.0f} s at {:.1f} s a task; a new node takes about {:.0f} s: {} ({} in all, "
                     "nodes.max_nodes {})",
                     counted(p.waiting, "task"), g.wait_seconds, p.task_seconds, p.node_seconds,
                     counted(g.add, "more node", "more nodes"), p.nodes + g.add, p.max_nodes);
}

}  // namespace ferry::agent
