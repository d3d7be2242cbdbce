#pragma once
// What must hold of a team pool at every moment, whatever agents did in whatever order: the check tests
// and the end-to-end test run after every step. Over the records as they are in storage at time `now`:
//   - no node's unexpired leases hold more slots than its capacity (no slot is leased twice);
//   - lease ids are unique across the pool (renew and release find exactly one lease);
//   - every lease names a tenant (the per-tenant cap counts by it).
#include "agent/pool/pool_record.hpp"

#include <string>
#include <vector>

namespace ferry::agent::pool {

// The violations, one sentence each naming the node and lease; empty when the pool is sound.
std::vector<std::string> check_pool(const std::vector<pool_record>& records, pool_time now);

}  // namespace ferry::agent::pool
