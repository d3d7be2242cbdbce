#include "tracing/utilisation.hpp"

#include <algorithm>

namespace ferry::tracing {

double node_usage::busy_seconds() const {
  double sum = 0;
  for (const auto& b : busy) sum += b.length();
  return sum;
}

void utilisation::add(const node_usage& u) {
  provisioned_node_seconds += u.provisioned_seconds();
  busy_node_seconds += u.busy_seconds();
}

void utilisation::add(const utilisation& u) {
  provisioned_node_seconds += u.provisioned_node_seconds;
  busy_node_seconds += u.busy_node_seconds;
}

std::vector<interval> merge_intervals(std::vector<interval> spans) {
  std::sort(spans.begin(), spans.end(), [](const interval& a, const interval& b) { return a.begin < b.begin; });
  std::vector<interval> out;
  for (const auto& s : spans) {
    if (s.end <= s.begin) continue;
    if (!out.empty() && s.begin <= out.back().end)
      out.back().end = std::max(out.back().end, s.end);
    else
      out.push_back(s);
  }
  return out;
}

node_usage measure_node(std::string node, const node_observations& seen, double job_end) {
  const double end = std::max(seen.first_seen, seen.released ? std::min(*seen.released, job_end) : job_end);
  node_usage u{std::move(node), {seen.first_seen, end}, {}};
  std::vector<interval> clipped;
  // Clipped to the provisioned time: a skewed clock on the node must not make it more than fully busy.
  for (const auto& t : seen.tasks)
    clipped.push_back({std::clamp(t.begin, u.provisioned.begin, u.provisioned.end),
                       std::clamp(t.end, u.provisioned.begin, u.provisioned.end)});
  u.busy = merge_intervals(std::move(clipped));
  return u;
}

std::vector<node_count> nodes_over_time(const std::vector<const node_usage*>& usages) {
  struct change {
    double time;
    int provisioned;
    int busy;
  };
  std::vector<change> changes;
  for (const auto* u : usages) {
    if (u->provisioned.length() <= 0) continue;
    changes.push_back({u->provisioned.begin, 1, 0});
    changes.push_back({u->provisioned.end, -1, 0});
    for (const auto& b : u->busy) {
      changes.push_back({b.begin, 0, 1});
      changes.push_back({b.end, 0, -1});
    }
  }
  std::sort(changes.begin(), changes.end(), [](const change& a, const change& b) { return a.time < b.time; });
  std::vector<node_count> out;
  node_count now;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    now.provisioned += changes[i].provisioned;
    now.busy += changes[i].busy;
    // One point per distinct time, after every change at that time.
    if (i + 1 < changes.size() && changes[i + 1].time == changes[i].time) continue;
    now.time = changes[i].time;
    out.push_back(now);
  }
  return out;
}

}  // namespace ferry::tracing
