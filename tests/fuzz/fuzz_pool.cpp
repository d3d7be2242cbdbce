// The team pool's records and leases on hostile input. Anyone with write access to the bucket may put any
// bytes under nodes/, and agents may act in any order. The first byte picks what the rest is:
//   even: a record to parse. It must never crash; a record accepted must pass the pool's invariant check
//         (its leases within its capacity even if none has expired, unique ids, tenants named), and
//         serialise to bytes that parse back to the same record and serialise again to the same bytes.
//   odd:  a script of agents acquiring, holding, releasing and crashing, and an autoscaler removing idle
//         nodes, interleaved against an in-memory store with real ETag semantics (tests/agent/pool_sim.hpp):
//         after every step the invariant check finds nothing, and the pool never exceeds its maximum.
#include "agent/pool/lease_core.hpp"
#include "agent/pool/pool_invariants.hpp"
#include "agent/pool/pool_record.hpp"
#include "tests/agent/pool_sim.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace pool = ferry::agent::pool;
namespace sim = ferry::test::pool_sim;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void parse_one(std::string_view text) {
  ferry::diagnostics diag;
  const auto r = pool::parse_record(text, "", diag);
  if (!r) {
    check(!diag.empty());
    return;
  }
  // At a time before every expiry, every lease counts.
  check(pool::check_pool({*r}, -1).empty());
  const auto bytes = pool::serialise_record(*r);
  const auto back = pool::parse_record(bytes, r->node_id, diag);
  check(back && *back == *r);
  check(pool::serialise_record(*back) == bytes);
}

// Removes idle nodes in two steps, as a real autoscaler would: a scan, and later conditional deletes that
// fail if anything wrote the record meanwhile.
struct autoscaler {
  std::vector<std::pair<std::string, std::string>> pending;  // node id, ETag at the scan

  void scan(const sim::memory_store& store, pool::pool_time now, int min_nodes) {
    const auto snapshot = store.read();
    pending.clear();
    for (const auto& id : pool::idle_nodes(snapshot, now, 30, min_nodes))
      pending.emplace_back(id, snapshot.find(id)->etag);
  }
  void remove(sim::memory_store& store) {
    for (const auto& [id, etag] : pending) store.remove(id, etag);
    pending.clear();
  }
};

void run_script(std::string_view script) {
  if (script.size() < 3) return;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(script[i]); };
  const pool::pool_limits limits{.max_nodes = 1 + byte(0) % 4,
                                 .max_nodes_per_tenant = byte(1) % 3,
                                 .node_slots = 1 + byte(2) % 4};
  const int min_nodes = byte(0) / 4 % 3;
  script.remove_prefix(3);
  sim::memory_store store;
  std::vector<sim::agent> agents;
  for (int i = 0; i < 8; ++i) {
    // Some agents ask for more than a node holds: they must be refused, never squeezed in.
    agents.emplace_back(i, limits, 1 + i % 5, 10 + 10 * (i % 3), 4);
    agents.back().rounds = 1000;  // as long as the script runs
  }
  autoscaler scaler;
  pool::pool_time now = 1'700'000'000;
  for (const unsigned char c : script) {
    const unsigned op = c >> 3;  // 0-31
    if (op < 24) {
      agents[c % 8].step(store, now, op);
    } else if (op < 28) {
      now += 1 + (c & 7) * (op - 23);  // up to 32 s
    } else if (op < 30) {
      scaler.scan(store, now, min_nodes);
    } else {
      scaler.remove(store);
    }
    check(pool::check_pool(store.records(), now).empty());
    check(store.size() <= static_cast<std::size_t>(limits.max_nodes));
    check(store.unreadable() == 0);
    check(store.missing_leases(sim::holders(agents), now).empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    parse_one(rest);
  } else {
    run_script(rest);
  }
  return 0;
}
