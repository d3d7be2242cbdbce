#include "agent/pool/pool_simulator.hpp"

#include "tracing/percentiles.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace ferry::agent::pool {
namespace {

constexpr double sim_never = std::numeric_limits<double>::infinity();

struct sim_node {
  double created = 0;
  double ready = 0;
  double stopped = sim_never;
  int used = 0;
  double idle_since = 0;  // meaningful while ready and unused
  double busy_since = 0;  // meaningful while used > 0
  double busy_total = 0;  // seconds with at least one slot leased
  bool up() const { return stopped == sim_never; }
};

struct sim_running {
  double end = 0;
  std::size_t job = 0;
  std::vector<std::pair<std::size_t, int>> held;  // (node, slots)
};

void check_simulation_input(const std::vector<sim_job>& jobs, const pool_policy& p) {
  if (p.max_nodes < 1 || p.max_nodes < p.min_nodes || p.min_nodes < 0 || p.capacity < 1 ||
      p.max_nodes_per_tenant < 0 || p.idle_timeout < 0 || p.boot < 0 || p.poll < 0 || !std::isfinite(p.poll))
    throw std::invalid_argument("pool policy: needs 0 <= min_nodes <= max_nodes, max_nodes >= 1, capacity >= 1 "
                                "and no negative time");
  for (const auto& j : jobs)
    if (j.slots < 1 || j.arrival < 0 || j.duration < 0 || !std::isfinite(j.arrival) || !std::isfinite(j.duration))
      throw std::invalid_argument("pool workload: a job needs slots >= 1 and a finite, non-negative arrival and duration");
}

sim_waits waits_of(std::vector<double> w) {
  std::sort(w.begin(), w.end());
  const double mean = w.empty() ? 0 : std::accumulate(w.begin(), w.end(), 0.0) / static_cast<double>(w.size());
  return {w.size(), tracing::nearest_rank(w, 50), tracing::nearest_rank(w, 95), w.empty() ? 0 : w.back(), mean};
}

class simulation {
 public:
  simulation(const std::vector<sim_job>& jobs, const pool_policy& p)
      : jobs_(jobs), p_(p), starts_(jobs.size(), sim_never), next_read_(jobs.size(), 0) {
    order_.resize(jobs.size());
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    std::stable_sort(order_.begin(), order_.end(),
                     [&](std::size_t a, std::size_t b) { return jobs_[a].arrival < jobs_[b].arrival; });
    for (int i = 0; i < p.min_nodes; ++i) nodes_.push_back({});
  }

  sim_result run() {
    double now = 0;
    for (;;) {
      step(now);
      const double next = next_event(now);
      if (next == sim_never) break;
      now = next;
    }
    return finish();
  }

 private:
  // Placement runs again after growth: a node that boots in no time takes its job at once. Idle nodes
  // stop last, so that one a job just took stays.
  // A job of no duration ends at the moment it starts: the pass repeats until nothing more ends now.
  void step(double now) {
    while (next_arrival_ < order_.size() && jobs_[order_[next_arrival_]].arrival <= now) {
      next_read_[order_[next_arrival_]] = jobs_[order_[next_arrival_]].arrival;
      waiting_.push_back(order_[next_arrival_++]);
    }
    booted_slots_ = 0;
    for (const auto& n : nodes_)
      if (n.up() && n.ready == now && n.created < now) booted_slots_ += p_.capacity;
    do {
      end_jobs(now);
      place(now);
      grow(now);
      place(now);
    } while (std::any_of(running_.begin(), running_.end(), [now](const sim_running& r) { return r.end <= now; }));
    for (auto index : waiting_) schedule_read(index, now);
    stop_idle(now);
  }

  void end_jobs(double now) {
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->end > now) {
        ++it;
        continue;
      }
      for (const auto& [index, slots] : it->held) {
        auto& n = nodes_[index];
        n.used -= slots;
        if (n.used == 0) {
          n.idle_since = it->end;
          n.busy_total += it->end - n.busy_since;
        }
      }
      tenant_slots_[jobs_[it->job].tenant] -= jobs_[it->job].slots;
      end_ = std::max(end_, it->end);
      it = running_.erase(it);
    }
  }

  int live() const {
    return static_cast<int>(std::count_if(nodes_.begin(), nodes_.end(), [](const sim_node& n) { return n.up(); }));
  }

  // Nodes past their idle timeout stop, earliest first, while more than the minimum are up. Not while a
  // job waits that the tenant cap lets start: its agent, polling for slots, would have leased the node.
  void stop_idle(double now) {
    if (need() > 0) return;
    for (;;) {
      std::size_t best = nodes_.size();
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        const auto& n = nodes_[i];
        if (!n.up() || n.ready > now || n.used > 0 || n.idle_since + p_.idle_timeout > now) continue;
        if (best == nodes_.size() || n.idle_since < nodes_[best].idle_since) best = i;
      }
      if (best == nodes_.size() || live() <= p_.min_nodes) return;
      // Not before now: a node kept for a job that waited stopped only once nothing waited.
      nodes_[best].stopped = std::max(now, nodes_[best].idle_since + p_.idle_timeout);
    }
  }

  // Whether a tenant holding `held` slots may take `slots` more: max_nodes_per_tenant nodes' worth.
  bool under_cap(int held, int slots) const {
    return p_.max_nodes_per_tenant == 0 || held + slots <= p_.max_nodes_per_tenant * p_.capacity;
  }

  bool within_cap(const sim_job& j) { return under_cap(tenant_slots_[j.tenant], j.slots); }

  bool placeable(const sim_job& j) const {
    const int cap = p_.max_nodes_per_tenant == 0 ? p_.max_nodes : std::min(p_.max_nodes, p_.max_nodes_per_tenant);
    return j.slots <= cap * p_.capacity;
  }

  int free_ready(double now) const {
    int free = 0;
    for (const auto& n : nodes_)
      if (n.up() && n.ready <= now) free += p_.capacity - n.used;
    return free;
  }

  // The waiting jobs that read the pool now, in arrival order, and those the nodes booted now were made
  // for (step() sets the next read of those that found too few free slots).
  void place(double now) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      const auto& j = jobs_[*it];
      const bool booted_for_it = booted_slots_ > 0;
      if (!(reads_now(*it, now) || booted_for_it) || !within_cap(j) || free_ready(now) < j.slots) {
        ++it;
        continue;
      }
      if (!reads_now(*it, now)) booted_slots_ -= std::min(booted_slots_, j.slots);
      start(*it, now);
      it = waiting_.erase(it);
    }
  }

  bool reads_now(std::size_t job, double now) const { return p_.poll == 0 || next_read_[job] <= now; }

  // A waiting job's next read: its arrival plus a whole number of polls, after now.
  void schedule_read(std::size_t job, double now) {
    if (p_.poll == 0 || next_read_[job] > now) return;
    const double arrival = jobs_[job].arrival;
    double k = std::floor((now - arrival) / p_.poll) + 1;
    while (arrival + k * p_.poll <= now) ++k;  // rounding
    next_read_[job] = arrival + k * p_.poll;
  }

  // Slots from the busiest ready nodes first, so that idle ones can time out.
  void start(std::size_t job, double now) {
    const auto& j = jobs_[job];
    std::vector<std::size_t> ready;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].up() && nodes_[i].ready <= now && nodes_[i].used < p_.capacity) ready.push_back(i);
    std::stable_sort(ready.begin(), ready.end(),
                     [&](std::size_t a, std::size_t b) { return nodes_[a].used > nodes_[b].used; });
    sim_running r{now + j.duration, job, {}};
    int left = j.slots;
    for (auto i : ready) {
      if (left == 0) break;
      auto& n = nodes_[i];
      const int take = std::min(left, p_.capacity - n.used);
      if (n.used == 0) n.busy_since = now;
      n.used += take;
      left -= take;
      r.held.emplace_back(i, take);
    }
    starts_[job] = now;
    busy_slot_seconds_ += j.duration * j.slots;
    tenant_slots_[j.tenant] += j.slots;
    running_.push_back(std::move(r));
  }

  // The slots of the waiting jobs that the pool can ever hold and that the tenant cap lets start, the
  // waiting jobs of a tenant counted in arrival order against its cap as if they ran.
  int need() {
    int slots = 0;
    std::map<std::string, int> would_hold;
    for (auto index : waiting_) {
      const auto& j = jobs_[index];
      auto& held = would_hold.try_emplace(j.tenant, tenant_slots_[j.tenant]).first->second;
      if (!placeable(j) || !under_cap(held, j.slots)) continue;
      held += j.slots;
      slots += j.slots;
    }
    return slots;
  }

  // A job that finds too few free slots makes nodes, up to the maximum: as many as the waiting jobs need
  // beyond the free slots and those of nodes still booting (it does not wait for running jobs to end).
  void grow(double now) {
    int coming = free_ready(now);
    for (const auto& n : nodes_)
      if (n.up() && n.ready > now) coming += p_.capacity;
    const int short_by = need() - coming;
    if (short_by <= 0) return;
    const int more = std::min((short_by + p_.capacity - 1) / p_.capacity, p_.max_nodes - live());
    for (int i = 0; i < more; ++i) {
      sim_node n;
      n.created = now;
      n.ready = now + p_.boot;
      n.idle_since = n.ready;
      nodes_.push_back(n);
      if (p_.boot == 0) booted_slots_ += p_.capacity;  // ready at once, for the jobs that asked
    }
  }

  // The next time something happens; sim_never once nothing will. Idle timeouts count only while nothing
  // waits (stop_idle) and work remains: after the last job, finish() stops the nodes.
  double next_event(double now) {
    double next = sim_never;
    if (next_arrival_ < order_.size()) next = std::min(next, jobs_[order_[next_arrival_]].arrival);
    for (const auto& r : running_) next = std::min(next, r.end);
    // The waiting jobs' next reads (those the pool can never hold read in vain: not an event).
    if (p_.poll > 0)
      for (auto index : waiting_)
        if (placeable(jobs_[index]) && next_read_[index] > now) next = std::min(next, next_read_[index]);
    const bool work_left = next_arrival_ < order_.size() || !running_.empty();
    const bool may_stop = work_left && need() == 0 && live() > p_.min_nodes;
    for (const auto& n : nodes_) {
      if (!n.up()) continue;
      if (n.ready > now) next = std::min(next, n.ready);
      else if (may_stop && n.used == 0) next = std::min(next, n.idle_since + p_.idle_timeout);
    }
    if (next <= now) throw std::logic_error("pool simulator: no progress at a step");
    return next;
  }

  sim_result finish() {
    sim_result out;
    out.end = end_;
    // Nodes still up: the minimum until the work ends, the others until their idle timeout.
    std::vector<std::size_t> up;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].up()) up.push_back(i);
    std::stable_sort(up.begin(), up.end(),
                     [&](std::size_t a, std::size_t b) { return nodes_[a].idle_since < nodes_[b].idle_since; });
    const auto extra = up.size() > static_cast<std::size_t>(p_.min_nodes) ? up.size() - p_.min_nodes : 0;
    for (std::size_t k = 0; k < up.size(); ++k) {
      auto& n = nodes_[up[k]];
      n.stopped = k < extra ? std::max(end_, n.idle_since + p_.idle_timeout) : std::max(end_, n.ready);
    }
    for (const auto& n : nodes_) {
      out.node_seconds += n.stopped - n.created;
      out.idle_node_seconds += std::max(0.0, n.stopped - n.ready - n.busy_total);
    }
    out.busy_slot_seconds = busy_slot_seconds_;
    if (out.node_seconds > 0) out.utilisation = busy_slot_seconds_ / (out.node_seconds * p_.capacity);
    out.starts = starts_;
    std::vector<double> all;
    std::map<std::string, std::vector<double>> by_tenant;
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      if (starts_[i] == sim_never) {
        ++out.unplaceable;
        continue;
      }
      all.push_back(starts_[i] - jobs_[i].arrival);
      by_tenant[jobs_[i].tenant].push_back(starts_[i] - jobs_[i].arrival);
    }
    out.waits = waits_of(all);
    for (auto& [tenant, w] : by_tenant) out.tenants[tenant] = waits_of(std::move(w));
    out.nodes = nodes_over_time();
    return out;
  }

  // The count of nodes up at each change, from every node's creation and stop.
  std::vector<std::pair<double, int>> nodes_over_time() const {
    std::vector<std::pair<double, int>> changes;  // (time, +1 or -1)
    for (const auto& n : nodes_) {
      changes.emplace_back(n.created, +1);
      changes.emplace_back(n.stopped, -1);
    }
    std::stable_sort(changes.begin(), changes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::pair<double, int>> out{{0.0, 0}};
    int count = 0;
    for (const auto& [t, d] : changes) {
      count += d;
      if (out.back().first == t) out.back().second = count;
      else out.emplace_back(t, count);
    }
    return out;
  }

  const std::vector<sim_job>& jobs_;
  pool_policy p_;
  std::vector<double> starts_;
  std::vector<double> next_read_;  // per job, while it waits: when it reads the pool next (poll > 0)
  int booted_slots_ = 0;           // slots of nodes that finished booting at this step, for their askers
  std::vector<std::size_t> order_;  // job indices by arrival
  std::size_t next_arrival_ = 0;
  std::vector<std::size_t> waiting_;
  std::vector<sim_running> running_;
  std::vector<sim_node> nodes_;
  std::map<std::string, int> tenant_slots_;
  double busy_slot_seconds_ = 0;
  double end_ = 0;
};

}  // namespace

sim_result simulate(const std::vector<sim_job>& jobs, const pool_policy& policy) {
  check_simulation_input(jobs, policy);
  return simulation(jobs, policy).run();
}

}  // namespace ferry::agent::pool
