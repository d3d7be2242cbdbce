#pragma once
// An SVG chart of a pool's nodes over time, one step line per policy, as a dashboard's plot of node count
// shows it: minutes along, nodes up. Self-contained (no script, no style sheet), so that it opens anywhere.
#include <string>
#include <utility>
#include <vector>

namespace ferry::agent::pool {

struct chart_line {
  std::string label;                          // the policy, as the table names it
  std::vector<std::pair<double, int>> steps;  // (seconds, nodes from then on), in time order
};

std::string nodes_chart_svg(const std::vector<chart_line>& lines);

}  // namespace ferry::agent::pool
