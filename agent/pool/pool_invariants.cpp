#include "agent/pool/pool_invariants.hpp"

#include <fmt/format.h>

#include <map>

namespace ferry::agent::pool {

std::vector<std::string> check_pool(const std::vector<pool_record>& records, pool_time now) {
  std::vector<std::string> out;
  std::map<std::string, std::string> owner;  // lease id -> the node it was first seen on
  for (const auto& r : records) {
    std::int64_t used = 0;  // summed wide: a hostile record's slots may add up past an int
    for (const auto& l : r.leases) {
      if (!l.expired(now)) used += l.slots;
      if (l.tenant.empty()) out.push_back(fmt::format("node '{}': lease '{}' has no tenant", r.node_id, l.id));
      if (l.slots < 1)
        out.push_back(fmt::format("node '{}': lease '{}' holds {} slots", r.node_id, l.id, l.slots));
      const auto [it, fresh] = owner.emplace(l.id, r.node_id);
      if (!fresh)
        out.push_back(fmt::format("lease id '{}' is held on node '{}' and again on node '{}'", l.id, it->second,
                                  r.node_id));
    }
    if (used > r.capacity)
      out.push_back(fmt::format("node '{}': unexpired leases hold {} slots of its {} at {}", r.node_id, used,
                                r.capacity, now));
  }
  return out;
}

}  // namespace ferry::agent::pool
