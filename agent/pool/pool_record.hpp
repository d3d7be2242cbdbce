#pragma once
// One node of a team's shared pool, as it lives in storage: one JSON object per node,
// PREFIX/pools/NAME/nodes/<node-id>.json, written only with conditional PUTs (lease_core.hpp decides what
// to write). The record holds the node's leases: who holds how many of its slots until when. There is no
// coordinator, so the record is the whole truth, and anyone with write access to the bucket may have
// written it: parsing refuses a record that breaks its own rules, naming the node and the field.
//
// Times are whole seconds since the epoch (pool_time). Integers, not doubles: Boost.JSON prints a double
// as "1.7E9", whose digits depend on the value's binary form, so the same record would not always give the
// same bytes; integers compare exactly (a lease "expired at t" means the same to every agent that reads it);
// and a second is far finer than what a lease needs (TTLs of minutes, clocks of agents on different hosts
// skewed by more than a second anyway).
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent::pool {

using pool_time = std::int64_t;  // seconds since the epoch
// The latest time a record may hold: far beyond any clock, and exact in any JSON reader (2^53).
inline constexpr pool_time max_pool_time = pool_time{1} << 53;

// The record format this code writes and reads; a record of another version is refused, because
// rewriting a record whose fields it does not know would drop them.
inline constexpr int record_version = 1;

struct lease {
  std::string id;        // unique in the pool: the acquirer's random id
  std::string tenant;    // the user (or team member) the slots are counted against
  int slots = 0;         // >= 1
  std::string holder;    // the agent holding it: host, pid and a random part (opaque here)
  pool_time expires_at = 0;

  bool expired(pool_time now) const { return expires_at <= now; }
  friend bool operator==(const lease&, const lease&) = default;
};

struct pool_record {
  int version = record_version;
  std::string node_id;        // the object's name: nodes/<node_id>.json
  std::string provider;       // "local", "ssh" or "ec2"
  std::string provider_id;    // the provider's own name for the node (an instance id, a host)
  std::string address;
  int ssh_port = 22;
  std::string user;           // the login user
  std::string host_key;       // the pinned host key, "TYPE BASE64", opaque here
  int capacity = 0;           // slots, >= 1
  pool_time created_at = 0;
  std::string created_by;     // the tenant that made the node
  std::optional<pool_time> idle_since;  // set exactly when the node holds no lease
  std::vector<lease> leases;  // ascending by id: the canonical order, so equal records serialise equal

  friend bool operator==(const pool_record&, const pool_record&) = default;
};

// Slots held by leases that have not expired at `now`.
int used_slots(const pool_record& r, pool_time now);
// Whether some lease has not expired at `now`.
bool busy(const pool_record& r, pool_time now);
// When the node became idle, if it holds no unexpired lease at `now`: idle_since, or the moment its last
// lease expired when nobody has written the record since.
std::optional<pool_time> idle_from(const pool_record& r, pool_time now);

// The lease of that id, or null.
const lease* find_lease(const pool_record& r, std::string_view lease_id);

// Parses a record; errc::bad_pool_record with the node (or the object's name, `where`) and the field named
// in `diag` for anything but a well-formed, self-consistent record. Leases come back in canonical order.
// The rules, none of which needs a clock (so every reader agrees): version 1; every field present with its
// type and no other field; non-empty node id, provider (one of the three), address and creator; ssh port
// 1-65535; capacity >= 1; each lease with an id, a tenant, a holder and slots >= 1; lease ids unique; the
// slots of ALL the leases within capacity (lease_core drops expired leases from every record it writes, so
// a record it wrote never holds more, expired or not); idle_since set exactly when there is no lease.
result<pool_record> parse_record(std::string_view text, std::string_view where, diagnostics& diag);

// The record's JSON, the same bytes for equal records: fields in a fixed order, leases sorted by id.
std::string serialise_record(const pool_record& r);

// The record's own rules as above, for a record made in memory (parse_record applies the same).
result<void> check_record(const pool_record& r, std::string_view where, diagnostics& diag);

// Leases sorted by id, the canonical order.
void sort_leases(pool_record& r);

}  // namespace ferry::agent::pool
