#include "agent/pool/pool_workload.hpp"

#include <algorithm>
#include <limits>

namespace ferry::agent::pool {

std::vector<sim_job> workload_from(const tracing::trace_stats& stats) {
  double first = std::numeric_limits<double>::infinity();
  for (const auto& j : stats.jobs)
    if (!j.nodes.empty()) first = std::min(first, j.time.begin);
  std::vector<sim_job> out;
  for (const auto& j : stats.jobs) {
    double begin = std::numeric_limits<double>::infinity(), end = -begin;
    for (const auto& n : j.nodes)
      for (const auto& busy : n.busy) {
        begin = std::min(begin, busy.begin);
        end = std::max(end, busy.end);
      }
    if (j.nodes.empty() || end < begin) continue;  // no task ran: nothing held a slot
    out.push_back({j.time.begin - first, j.tenant.empty() ? "-" : j.tenant, static_cast<int>(j.nodes.size()),
                   end - begin});
  }
  return out;
}

}  // namespace ferry::agent::pool
