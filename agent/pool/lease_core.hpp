#pragma once
// The decisions of a team pool's leases, as pure functions of a snapshot (pool_snapshot.hpp) and the time:
// no storage, no clock. Each decision that changes a record comes out as a record_write, which the caller
// PUTs with its condition (If-Match on the ETag the record was read at, or If-None-Match: * for a new
// node); a write that fails its condition means someone else wrote first, and the caller reads again and
// decides again (acquire_core.hpp drives that loop for an acquire).
//
// Every record written passes through expire(): leases past their expiry are dropped whenever a record is
// written for another reason, so a crashed agent's slots come back without anyone cleaning up after it,
// and a record holds no more leased slots than its capacity, expired or not (pool_record.hpp relies on it).
//
// Times are compared against `now` as the caller's clock gives it. Agents on different hosts disagree by
// their clock skew: a lease is safe only if its TTL is well beyond that skew, and an agent should renew
// well before expires_at (the caller's config, not this code, sets both).
#include "agent/pool/pool_record.hpp"
#include "agent/pool/pool_snapshot.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent::pool {

// One conditional PUT of nodes/<node_id>.json.
struct record_write {
  std::string node_id;
  std::optional<std::string> if_match;  // none: a new object, If-None-Match: *
  pool_record record;

  std::string body() const { return serialise_record(record); }
};

// What the pool may hold; the caller's config gives them.
struct pool_limits {
  int max_nodes = 0;             // nodes in the pool, readable or not
  // Nodes on which one tenant holds unexpired leases at once; 0: no cap. Counted by what the tenant
  // holds now, not by the nodes it created: a node outlives its creator's work (it idles until the
  // timeout, and others lease it), so a cap by creator would keep a tenant that holds nothing from growing
  // the pool because of nodes others are using, while a cap by holding bounds exactly the share of the
  // pool one tenant keeps from the others, and it frees itself as leases end or expire.
  int max_nodes_per_tenant = 0;
  int node_slots = 0;            // the capacity of a node the pool makes
};

struct lease_request {
  std::string lease_id;  // the caller's random id: unique in the pool, and the same on every retry
  std::string tenant;
  int slots = 0;
  pool_time ttl = 0;     // seconds
  std::string holder;    // host, pid and a random part
  // Nodes this lease must not go to: those where the caller's job holds a lease already, so that a job
  // that asks for N nodes gets N different ones.
  std::vector<std::string> avoid;
};

struct acquire_decision {
  enum class kind {
    write,   // `write`: the chosen node's record with the lease added
    create,  // no node has room and the pool may grow: make a node, then register_node() it as `node_id`
    wait,    // the pool (or the tenant's share) is full: read again at `until`, when room may come back
    refuse,  // the request can never be met as things are: `error` and `reason`
  };
  kind what = kind::refuse;
  std::optional<record_write> write;
  std::string node_id;  // create
  pool_time until = 0;  // wait
  error_code error;     // refuse
  std::string reason;   // wait and refuse: for a person
};

// Where `request` goes at `now`. A node has room when its capacity less the slots of its unexpired leases
// is at least request.slots. Among those, busy nodes come first and the fullest of them first (packing
// leaves idle nodes idle, so they reach the idle timeout and go), then node id for determinism. With no
// room and the pool below max_nodes, create (the lowest free name, node_name()); at max_nodes, wait until
// the first time a node would have room if no lease were renewed. The tenant's cap is checked in both
// cases: at its cap, only nodes where it already holds a lease are candidates. Nodes in request.avoid
// are never candidates.
acquire_decision acquire(const pool_snapshot& snapshot, pool_time now, const lease_request& request,
                         const pool_limits& limits);

// Names of the nodes the pool makes: node-000, node-001, ... Names are taken in order, so two agents that
// make a node at once pick the same name, and If-None-Match lets one of them in.
std::string node_name(int index);

// A node just made, as the provider reports it.
struct new_node {
  std::string provider;
  std::string provider_id;
  std::string address;
  int ssh_port = 22;
  std::string user;
  std::string host_key;
  int capacity = 0;
};

// The first record of a node made for `request`: the creator's lease in it, written with If-None-Match.
// errc::bad_lease_request when the node cannot hold the request; bad_pool_record when the node's fields
// break a record's rules.
result<record_write> register_node(const std::string& node_id, const new_node& node, pool_time now,
                                   const lease_request& request, diagnostics& diag);

// The lease's expires_at moved to now + ttl (never earlier than it was). errc::lease_lost when the lease
// is not in the record or has expired: its slots may have gone to someone else, so it cannot come back.
result<record_write> renew(const pool_entry& entry, std::string_view lease_id, pool_time now, pool_time ttl,
                           diagnostics& diag);

// The record without the lease, or none when it holds no such lease (it expired and someone dropped it:
// nothing to do). The node becomes idle at `now` when that was its last lease.
std::optional<record_write> release(const pool_entry& entry, std::string_view lease_id, pool_time now);

// The record without its expired leases. A node they leave empty became idle when the last of them
// expired (not `now`: the idle timeout counts from when the node was last used).
pool_record expire(pool_record record, pool_time now);

// The nodes that have held no lease for idle_timeout seconds, beyond the `min_nodes` the pool keeps:
// longest idle first, so the pool keeps those used last. For the autoscaler, which ends them.
std::vector<std::string> idle_nodes(const pool_snapshot& snapshot, pool_time now, pool_time idle_timeout,
                                    int min_nodes);

}  // namespace ferry::agent::pool
