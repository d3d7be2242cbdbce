#include "agent/pool/lease_core.hpp"

#include "agent/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

namespace ferry::agent::pool {
namespace {

constexpr pool_time never = std::numeric_limits<pool_time>::max();

// now + seconds without overflow on hostile or careless input, and never past the latest time a record
// may hold (pool_record.hpp's max_pool_time): a record written must be one every agent reads back.
pool_time later(pool_time now, pool_time seconds) {
  if (seconds <= 0) return now;
  return now > max_pool_time - seconds ? max_pool_time : now + seconds;
}

acquire_decision refused(errc e, std::string reason) {
  acquire_decision d;
  d.what = acquire_decision::kind::refuse;
  d.error = make_error_code(e);
  d.reason = std::move(reason);
  return d;
}

bool holds_on(const pool_record& r, const std::string& tenant, pool_time now) {
  return std::any_of(r.leases.begin(), r.leases.end(),
                     [&](const lease& l) { return l.tenant == tenant && !l.expired(now); });
}

int tenant_nodes(const pool_snapshot& s, const std::string& tenant, pool_time now) {
  return static_cast<int>(std::count_if(s.nodes.begin(), s.nodes.end(),
                                        [&](const pool_entry& e) { return holds_on(e.record, tenant, now); }));
}

bool lease_id_taken(const pool_snapshot& s, const std::string& id) {
  return std::any_of(s.nodes.begin(), s.nodes.end(),
                     [&](const pool_entry& e) { return find_lease(e.record, id) != nullptr; });
}

// The first time from `now` on at which `r` has `slots` free, if no lease is renewed meanwhile; none when
// its capacity is too small.
std::optional<pool_time> room_at(const pool_record& r, int slots, pool_time now) {
  if (r.capacity < slots) return std::nullopt;
  std::vector<const lease*> live;
  for (const auto& l : r.leases)
    if (!l.expired(now)) live.push_back(&l);
  std::sort(live.begin(), live.end(), [](const lease* a, const lease* b) { return a->expires_at < b->expires_at; });
  std::int64_t free = r.capacity - used_slots(r, now);
  if (free >= slots) return now;
  for (const auto* l : live) {
    free += l->slots;
    if (free >= slots) return l->expires_at;
  }
  return now;  // unreachable: with every lease gone the whole capacity is free
}

// The first time the tenant, at its cap, holds a node fewer: its last lease on some node expires.
std::optional<pool_time> tenant_frees_at(const pool_snapshot& s, const std::string& tenant, pool_time now) {
  std::optional<pool_time> first;
  for (const auto& e : s.nodes) {
    pool_time last = 0;
    for (const auto& l : e.record.leases)
      if (l.tenant == tenant && !l.expired(now)) last = std::max(last, l.expires_at);
    if (last != 0) first = std::min(first.value_or(never), last);
  }
  return first;
}

result<void> check_request(const lease_request& q, diagnostics& diag) {
  if (q.lease_id.empty() || q.tenant.empty() || q.holder.empty() || q.slots < 1 || q.ttl < 1) {
    diag.set(fmt::format("a lease needs an id, a tenant, a holder, at least 1 slot and a TTL of at least 1 s "
                         "(asked: id '{}', tenant '{}', holder '{}', {} slots, {} s)",
                         q.lease_id, q.tenant, q.holder, q.slots, q.ttl));
    return make_error_code(errc::bad_lease_request);
  }
  return {};
}

lease lease_for(const lease_request& q, pool_time now) {
  return {q.lease_id, q.tenant, q.slots, q.holder, later(now, q.ttl)};
}

}  // namespace

std::string node_name(int index) { return fmt::format("node-{:03}", index); }

pool_record expire(pool_record record, pool_time now) {
  pool_time last_expiry = 0;
  std::erase_if(record.leases, [&](const lease& l) {
    if (!l.expired(now)) return false;
    last_expiry = std::max(last_expiry, l.expires_at);
    return true;
  });
  if (record.leases.empty() && !record.idle_since) record.idle_since = last_expiry;
  return record;
}

acquire_decision acquire(const pool_snapshot& snapshot, pool_time now, const lease_request& request,
                         const pool_limits& limits) {
  diagnostics diag;
  if (auto ok = check_request(request, diag); !ok) return refused(errc::bad_lease_request, diag.message);
  // The lease id is the caller's random choice; one already in the pool is a collision or a bug, and two
  // leases of one id would make renew and release ambiguous.
  if (lease_id_taken(snapshot, request.lease_id))
    return refused(errc::bad_lease_request, fmt::format("the lease id '{}' is in the pool already", request.lease_id));

  const bool capped = limits.max_nodes_per_tenant > 0 &&
                      tenant_nodes(snapshot, request.tenant, now) >= limits.max_nodes_per_tenant;
  const pool_entry* best = nullptr;
  std::tuple<bool, int, std::string_view> best_key;
  const auto avoided = [&request](const pool_record& r) {
    return std::find(request.avoid.begin(), request.avoid.end(), r.node_id) != request.avoid.end();
  };
  for (const auto& e : snapshot.nodes) {
    const auto& r = e.record;
    if (avoided(r) || (capped && !holds_on(r, request.tenant, now))) continue;
    const int free = r.capacity - used_slots(r, now);
    if (free < request.slots) continue;
    // Busy before idle, then the fullest, then by id.
    const std::tuple<bool, int, std::string_view> key{!busy(r, now), free, r.node_id};
    if (!best || key < best_key) {
      best = &e;
      best_key = key;
    }
  }
  if (best) {
    acquire_decision d;
    d.what = acquire_decision::kind::write;
    auto record = expire(best->record, now);
    record.leases.push_back(lease_for(request, now));
    record.idle_since.reset();
    sort_leases(record);
    d.write = record_write{record.node_id, best->etag, std::move(record)};
    return d;
  }

  // Growing is for what a new node can hold; a bigger request waits for the bigger nodes there are.
  const bool may_grow = static_cast<int>(snapshot.size()) < limits.max_nodes;
  if (may_grow && !capped && request.slots <= limits.node_slots) {
    acquire_decision d;
    d.what = acquire_decision::kind::create;
    // Below max_nodes objects, one of the first max_nodes names is free.
    for (int i = 0; i < limits.max_nodes && d.node_id.empty(); ++i)
      if (!snapshot.has_name(node_name(i))) d.node_id = node_name(i);
    return d;
  }

  std::optional<pool_time> until;
  for (const auto& e : snapshot.nodes) {
    if (avoided(e.record) || (capped && !holds_on(e.record, request.tenant, now))) continue;
    if (auto t = room_at(e.record, request.slots, now)) until = std::min(until.value_or(never), *t);
  }
  if (capped) {
    if (auto t = tenant_frees_at(snapshot, request.tenant, now)) until = std::min(until.value_or(never), *t);
  }
  if (!until)
    return refused(errc::pool_cannot_fit,
                   fmt::format("the pool has {} nodes ({} at most), none of which can ever hold {} slots{}, "
                               "and a new node would have {}",
                               snapshot.size(), limits.max_nodes, request.slots,
                               request.avoid.empty() ? std::string()
                                                     : fmt::format(" beside the {} the job holds already",
                                                                   request.avoid.size()),
                               limits.node_slots));
  acquire_decision d;
  d.what = acquire_decision::kind::wait;
  d.until = *until;
  d.reason = capped ? fmt::format("tenant '{}' holds leases on {} nodes, its most", request.tenant,
                                  limits.max_nodes_per_tenant)
                    : fmt::format("the pool's {} nodes have no {} slots free", snapshot.size(), request.slots);
  return d;
}

result<record_write> register_node(const std::string& node_id, const new_node& node, pool_time now,
                                   const lease_request& request, diagnostics& diag) {
  if (auto ok = check_request(request, diag); !ok) return ok.error();
  if (request.slots > node.capacity) {
    diag.set(fmt::format("node '{}' has {} slots, and the lease asks for {}", node_id, node.capacity, request.slots));
    return make_error_code(errc::bad_lease_request);
  }
  pool_record r;
  r.node_id = node_id;
  r.provider = node.provider;
  r.provider_id = node.provider_id;
  r.address = node.address;
  r.ssh_port = node.ssh_port;
  r.user = node.user;
  r.host_key = node.host_key;
  r.capacity = node.capacity;
  r.created_at = now;
  r.created_by = request.tenant;
  r.leases.push_back(lease_for(request, now));
  if (auto ok = check_record(r, node_id, diag); !ok) return ok.error();
  return record_write{node_id, std::nullopt, std::move(r)};
}

result<record_write> renew(const pool_entry& entry, std::string_view lease_id, pool_time now, pool_time ttl,
                           diagnostics& diag) {
  const auto* held = find_lease(entry.record, lease_id);
  if (!held || held->expired(now)) {
    diag.set(fmt::format("lease '{}' on pool node '{}' {}", lease_id, entry.record.node_id,
                         held ? fmt::format("expired at {}", held->expires_at) : std::string("is gone")));
    return make_error_code(errc::lease_lost);
  }
  auto record = expire(entry.record, now);
  for (auto& l : record.leases)
    if (l.id == lease_id) l.expires_at = std::max(l.expires_at, later(now, ttl));
  return record_write{record.node_id, entry.etag, std::move(record)};
}

std::optional<record_write> release(const pool_entry& entry, std::string_view lease_id, pool_time now) {
  if (!find_lease(entry.record, lease_id)) return std::nullopt;
  // The node was last used when the last of its leases ended: this one now (or at its expiry, if it had
  // expired before it was released), the others at their expiry.
  pool_time last_used = 0;
  for (const auto& l : entry.record.leases) last_used = std::max(last_used, std::min(l.expires_at, now));
  auto record = entry.record;
  std::erase_if(record.leases, [&](const lease& l) { return l.id == lease_id; });
  record = expire(std::move(record), now);
  if (record.leases.empty()) record.idle_since = last_used;
  return record_write{record.node_id, entry.etag, std::move(record)};
}

std::vector<std::string> idle_nodes(const pool_snapshot& snapshot, pool_time now, pool_time idle_timeout,
                                    int min_nodes) {
  std::vector<std::pair<pool_time, std::string>> idle;
  for (const auto& e : snapshot.nodes) {
    const auto from = idle_from(e.record, now);
    if (from && now - *from >= idle_timeout) idle.emplace_back(*from, e.record.node_id);
  }
  std::sort(idle.begin(), idle.end());
  const auto spare = std::max<std::int64_t>(0, static_cast<std::int64_t>(snapshot.nodes.size()) - min_nodes);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < idle.size() && static_cast<std::int64_t>(i) < spare; ++i)
    out.push_back(std::move(idle[i].second));
  return out;
}

}  // namespace ferry::agent::pool
