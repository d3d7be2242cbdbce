#include "agent/provide/warm_nodes.hpp"

#include <algorithm>

namespace ferry::agent {

bool is_pinned(const provision::node& n) {
  const auto* v = n.details.if_contains("pinned");
  return v && v->is_bool() && v->get_bool();
}

void pin(provision::node& n) { n.details["pinned"] = true; }

std::vector<std::string> warm_nodes(const std::vector<provision::node>& nodes, std::string_view provider,
                                    int min_nodes) {
  const auto counts = [&](const provision::node& n) {
    return n.provider == provider && n.state == provision::node_state::running;
  };
  auto pinned = static_cast<int>(
      std::count_if(nodes.begin(), nodes.end(), [&](const provision::node& n) { return counts(n) && is_pinned(n); }));
  std::vector<std::string> out;
  for (const auto& n : nodes) {
    if (!counts(n)) continue;
    if (is_pinned(n)) {
      out.push_back(n.id);
    } else if (pinned < min_nodes) {
      out.push_back(n.id);
      ++pinned;
    }
  }
  return out;
}

}  // namespace ferry::agent
