#pragma once
// A team pool in memory, for the lease core's tests and its fuzzer: a store of objects with real ETag
// semantics (each write gets a new tag from a counter; a write conditional on a stale tag, or a create of
// a name that exists, fails as S3 fails it with 412), and agents that each drive an acquire_core against
// it, one step at a time in whatever order the caller picks, then hold their lease for a while and release
// it or vanish without a word (a crash: only expiry brings its slots back).
#include "agent/pool/acquire_core.hpp"
#include "agent/pool/lease_core.hpp"
#include "agent/pool/pool_invariants.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ferry::test::pool_sim {

namespace pool = agent::pool;

struct agent_view {
  std::string node_id;
  const pool::lease* lease;
};

class memory_store {
 public:
  // The conditional PUT: true when it landed (and `etag` is the new tag), false on a failed condition.
  bool put(const pool::record_write& w, std::string& etag) {
    const auto it = objects_.find(w.node_id);
    if (w.if_match ? (it == objects_.end() || it->second.etag != *w.if_match) : it != objects_.end()) return false;
    etag = fmt::format("\"{}\"", ++counter_);
    set(w.node_id, etag, w.body());
    // The record as written, readable or not: a record the core wrote that breaks the rules is the
    // checker's to find, not to skip.
    objects_[w.node_id].written = w.record;
    refresh();
    return true;
  }
  // A raw object, as a party with write access to the bucket may put anything there.
  void put_raw(const std::string& node_id, std::string body) {
    set(node_id, fmt::format("\"{}\"", ++counter_), std::move(body));
    refresh();
  }
  // A conditional DELETE (the autoscaler's): true when it happened.
  bool remove(const std::string& node_id, const std::string& if_match) {
    const auto it = objects_.find(node_id);
    if (it == objects_.end() || it->second.etag != if_match) return false;
    objects_.erase(it);
    refresh();
    return true;
  }
  // List and read every object, as the shell does.
  pool::pool_snapshot read() const {
    pool::pool_snapshot s;
    for (const auto& [id, o] : objects_) {
      diagnostics ignored;
      (void)pool::add_object(s, id, o.etag, o.body, ignored);
    }
    return s;
  }
  // The records as they are, for the invariant checker: as the core wrote them, or as they parse. Kept
  // up to date by each write, not copied per check: the fuzzer checks after every step.
  const std::vector<pool::pool_record>& records() const { return records_; }
  // Objects that do not parse: none, unless put_raw put them there.
  std::size_t unreadable() const {
    return static_cast<std::size_t>(
        std::count_if(objects_.begin(), objects_.end(), [](const auto& o) { return !o.second.record; }));
  }
  std::size_t size() const { return objects_.size(); }

  // The lease-holders' side of the truth: every lease an agent believes it holds and that has not expired
  // is in its node's record. A write that dropped another agent's live lease (a lost update) shows here,
  // where the records alone look sound. One line per lease missing.
  std::vector<std::string> missing_leases(const std::vector<agent_view>& holders, pool::pool_time now) const {
    std::vector<std::string> out;
    const auto& records = records_;
    for (const auto& h : holders) {
      if (h.lease->expired(now)) continue;
      const auto it = std::find_if(records.begin(), records.end(),
                                   [&](const pool::pool_record& r) { return r.node_id == h.node_id; });
      if (it == records.end() || !pool::find_lease(*it, h.lease->id))
        out.push_back(fmt::format("lease '{}' on node '{}', held until {}, is gone from the pool", h.lease->id,
                                  h.node_id, h.lease->expires_at));
    }
    return out;
  }

 private:
  struct object {
    std::string etag;
    std::string body;
    std::optional<pool::pool_record> record;   // as it parses; none: unreadable
    std::optional<pool::pool_record> written;  // put(): as the core made it
  };
  void set(const std::string& node_id, std::string etag, std::string body) {
    diagnostics ignored;
    auto r = pool::parse_record(body, node_id, ignored);
    objects_[node_id] = {std::move(etag), std::move(body), r ? std::optional(std::move(*r)) : std::nullopt};
  }
  void refresh() {
    records_.clear();
    for (const auto& [id, o] : objects_) {
      if (o.written) {
        records_.push_back(*o.written);
      } else if (o.record) {
        records_.push_back(*o.record);
      }
    }
  }

  std::map<std::string, object> objects_;
  std::vector<pool::pool_record> records_;
  int counter_ = 0;
};

// One agent: acquires, holds, then releases (or crashes), `rounds` times.
class agent {
 public:
  enum class ended { running, leased, waited, failed };

  agent(int index, pool::pool_limits limits, int slots, pool::pool_time ttl, int max_conflicts)
      : index_(index), limits_(limits), slots_(slots), ttl_(ttl), max_conflicts_(max_conflicts) {
    start();
  }

  // One step of this agent against `store` at `now`; `choice` (any number) picks among what it may do
  // (how long it holds, whether it crashes).
  void step(memory_store& store, pool::pool_time now, unsigned choice) {
    if (phase_ == phase::acquiring) return acquire_step(store, now);
    if (phase_ == phase::holding) {
      if (choice % 4 != 0) return;  // holds a while longer
      if (choice % 16 == 4) return next_round();  // crashed: its lease stays until it expires
      phase_ = phase::releasing;
      return;
    }
    if (phase_ == phase::releasing) release_step(store, now);
  }

  bool finished() const { return phase_ == phase::finished; }
  // The lease this agent believes it holds (between its acquire and its release), if any.
  const pool::held_lease* holding() const {
    return phase_ == phase::holding || phase_ == phase::releasing ? &*core_.held() : nullptr;
  }
  // The outcome of each acquire so far.
  const std::vector<ended>& outcomes() const { return outcomes_; }
  const std::vector<std::string>& failures() const { return failures_; }
  const pool::acquire_core& core() const { return core_; }
  int conflicts() const { return conflicts_ + core_.conflicts(); }

  int rounds = 2;

 private:
  enum class phase { acquiring, holding, releasing, finished };

  void start() {
    ++round_;
    core_ = pool::acquire_core(
        {fmt::format("lease-{}-{}", index_, round_), fmt::format("tenant-{}", index_ % 3), slots_, ttl_,
         fmt::format("host:{}:{}", 1000 + index_, round_)},
        limits_, max_conflicts_);
    phase_ = phase::acquiring;
  }

  void next_round() {
    if (round_ >= rounds) {
      phase_ = phase::finished;
      return;
    }
    start();
  }

  void acquire_step(memory_store& store, pool::pool_time now) {
    using kind = pool::acquire_action::kind;
    const auto a = core_.next();
    switch (a.what) {
      case kind::read_pool: core_.pool_read(store.read(), now); break;
      case kind::write_record: {
        std::string etag;
        if (store.put(*a.write, etag)) {
          core_.written(etag);
        } else {
          core_.write_conflict();
        }
        break;
      }
      case kind::create_node:
        // The provider makes a node of the pool's size; its address is its name, as good as any here.
        core_.node_made({"local", fmt::format("made-by-{}-{}", index_, round_), a.node_id, 22, "root", "ssh-ed25519 AAAA",
                         limits_.node_slots},
                        now);
        break;
      case kind::wait_until:
        // A wait is an outcome the test accepts: the agent would sleep and try again.
        outcomes_.push_back(ended::waited);
        return next_round();
      case kind::finish:
        if (const auto& h = core_.held()) {
          outcomes_.push_back(ended::leased);
          node_ = h->node_id;
          phase_ = phase::holding;
        } else {
          outcomes_.push_back(ended::failed);
          failures_.push_back(describe(core_.failure(), core_.failure_diagnostics()));
          next_round();
        }
        break;
    }
  }

  // Read the node's record, drop the lease, write it back If-Match; a conflict reads again.
  void release_step(memory_store& store, pool::pool_time now) {
    const auto snapshot = store.read();
    const auto* entry = snapshot.find(node_);
    const auto lease_id = core_.held()->granted.id;
    if (entry) {
      if (const auto w = pool::release(*entry, lease_id, now)) {
        std::string etag;
        if (!store.put(*w, etag)) {
          ++conflicts_;
          return;  // read again at its next step
        }
      }
    }
    next_round();
  }

  int index_;
  pool::pool_limits limits_;
  int slots_;
  pool::pool_time ttl_;
  int max_conflicts_;
  int round_ = 0;
  phase phase_ = phase::acquiring;
  pool::acquire_core core_{{}, {}, 1};
  std::string node_;
  int conflicts_ = 0;
  std::vector<ended> outcomes_;
  std::vector<std::string> failures_;
};

// What every agent believes it holds.
inline std::vector<agent_view> holders(const std::vector<agent>& agents) {
  std::vector<agent_view> out;
  for (const auto& a : agents)
    if (const auto* h = a.holding()) out.push_back({h->node_id, &h->granted});
  return out;
}

}  // namespace ferry::test::pool_sim
