#include "agent/pool/pool_workload.hpp"

#include <algorithm>
#include <limits>

namespace ferry::agent::pool {

std::vector<sim_job> workload_from(const tracing::trace_stats& stats) {
  std::vector<sim_job> out;
  double first = std::numeric_limits<double>::infinity();
  for (const auto& j : stats.jobs) {
    double begin = std::numeric_limits<double>::infinity(), end = -begin;
    int slots = 0;
    for (const auto& n : j.nodes) {
      // A node that ran none of the job's tasks held none of its slots: on a pool, the job's trace also
      // names the pool's records (node-000, ...), the one it leased and those it only read or wrote.
      slots += !n.busy.empty();
      for (const auto& busy : n.busy) {
        begin = std::min(begin, busy.begin);
        end = std::max(end, busy.end);
      }
    }
    if (slots == 0 || end < begin) continue;  // no task ran: nothing held a slot
    first = std::min(first, j.time.begin);
    out.push_back({j.time.begin, j.tenant.empty() ? "-" : j.tenant, slots, end - begin});
  }
  for (auto& j : out) j.arrival -= first;
  return out;
}

}  // namespace ferry::agent::pool
