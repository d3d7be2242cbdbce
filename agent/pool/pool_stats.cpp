#include "agent/pool/pool_stats.hpp"

#include "tracing/action_interval.hpp"
#include "tracing/action_types.hpp"
#include "tracing/percentiles.hpp"
#include "tracing/trace_conventions.hpp"
#include "tracing/utilisation.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>

namespace ferry::agent::pool {
namespace {

using tracing::interval;
namespace types = action_types::pool;

struct acquire_seen {
  std::string tenant;
  int slots = 1;
  std::string lease_id;
  std::string node;
  bool joined = false;
  std::string_view outcome;  // succeeded, failed, cancelled, started
  interval span;
  double unreleased_end = 0;  // its job's end, or its task's last message
};

struct lease_span {
  std::string tenant;
  int slots = 1;
  interval span;
};

// What the traces say about the pool, gathered in one walk of every task.
struct observations {
  std::vector<acquire_seen> acquires;
  std::map<std::string, double> released;  // lease id -> the end of its first release
  std::vector<std::pair<std::string, double>> left;  // node, when
  std::size_t releases = 0;
  tracing::trace_conventions conventions;
};

std::string string_field(const tracing::tree_node& n, std::string_view key) {
  const auto* v = n.field(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

int slots_field(const tracing::tree_node& n) {
  const auto* v = n.field("slots");
  if (v && v->is_int64()) return static_cast<int>(std::max<std::int64_t>(v->get_int64(), 0));
  if (v && v->is_uint64()) return static_cast<int>(std::min<std::uint64_t>(v->get_uint64(), 1u << 20));
  return 1;
}

// `job`: the interval of the outermost job around `n`, if any; `task_end`: its task's last message.
void visit(const tracing::tree_node& n, const interval& parent, std::optional<interval> job, double task_end,
           observations& seen) {
  if (n.message) {
    if (n.type() == types::node_left)
      if (auto node = seen.conventions.node_in(n.message->fields); !node.empty())
        seen.left.emplace_back(std::move(node), n.message->timestamp);
    return;
  }
  const bool action = n.start || n.end;
  const auto span = action ? tracing::action_interval(n, parent) : parent;
  const auto type = n.type();
  if (action && !job && seen.conventions.is_job(type)) job = span;
  if (action && type == types::acquire) {
    const auto* joined = n.field("joined");
    seen.acquires.push_back({string_field(n, "tenant"), slots_field(n), string_field(n, "lease"),
                             seen.conventions.node_of(n), joined && joined->is_bool() && joined->get_bool(),
                             n.outcome(), span, job ? job->end : task_end});
  } else if (action && type == types::release) {
    ++seen.releases;
    const auto id = string_field(n, "lease");
    if (auto [it, added] = seen.released.try_emplace(id, span.end); !added) it->second = std::min(it->second, span.end);
  }
  for (const auto& [_, child] : n.children) visit(*child, span, job, task_end, seen);
}

observations observe(const std::vector<tracing::task_tree>& tasks) {
  observations seen;
  for (const auto& t : tasks) {
    const auto whole = tracing::extent(*t.root);
    visit(*t.root, whole, std::nullopt, whole.end, seen);
  }
  return seen;
}

// One node's life: from `begin` until `end`, with the leases on it.
struct node_life {
  double begin = 0;
  double end = 0;
  std::optional<double> last_lease_end;
  std::vector<lease_span> leases;

  // When it would stop by itself: its idle timeout after its last lease, or the traces' end.
  double expected_end(double idle_timeout, double traces_end) const {
    return std::min(last_lease_end.value_or(begin) + idle_timeout, traces_end);
  }
};

// The events of one node name in time order: a node leaving, then one joining, then a lease, at one time.
struct node_event {
  enum kind { left, join, lease } what;
  double at = 0;
  lease_span held;  // a lease's
};

std::vector<node_life> lives_of(std::vector<node_event> events, const pool_stats_settings& settings, double traces_end) {
  std::stable_sort(events.begin(), events.end(),
                   [](const node_event& a, const node_event& b) { return std::tie(a.at, a.what) < std::tie(b.at, b.what); });
  std::vector<node_life> out;
  std::optional<node_life> open;
  const auto close = [&](double at) {
    open->end = std::max(std::min(at, open->expected_end(settings.idle_timeout, traces_end)), open->begin);
    out.push_back(std::move(*open));
    open.reset();
  };
  for (auto& e : events) {
    switch (e.what) {
      case node_event::left:
        if (open) close(e.at);
        break;
      case node_event::join:
        if (open) close(e.at);
        open = node_life{e.at};
        break;
      case node_event::lease:
        // A node joining waits for its first lease however long it booted; a lease after the life's
        // expected end is on another node of that name.
        if (open && !open->leases.empty() && e.at > open->expected_end(settings.idle_timeout, traces_end)) close(e.at);
        if (!open) open = node_life{e.at};
        open->last_lease_end = std::max(open->last_lease_end.value_or(e.held.span.end), e.held.span.end);
        open->leases.push_back(std::move(e.held));
        break;
    }
  }
  if (open) close(traces_end);
  return out;
}

interval clipped(const interval& span, const node_life& life) {
  interval out{std::clamp(span.begin, life.begin, life.end), std::clamp(span.end, life.begin, life.end)};
  out.end = std::max(out.end, out.begin);
  return out;
}

double length_of(const std::vector<interval>& spans) {
  double sum = 0;
  for (const auto& s : spans) sum += s.length();
  return sum;
}

// Adds one node life's hours to the pool's and its tenants' figures.
void account(const node_life& life, pool_stats& out) {
  out.pool.node_seconds += life.end - life.begin;
  std::vector<interval> held;
  std::map<std::string, std::vector<interval>> held_by;
  std::vector<lease_span> leases;
  for (const auto& l : life.leases) {
    const auto span = clipped(l.span, life);
    const double slot_seconds = l.slots * span.length();
    out.pool.leased_slot_seconds += slot_seconds;
    out.tenants[l.tenant].leased_slot_seconds += slot_seconds;
    held.push_back(span);
    held_by[l.tenant].push_back(span);
    leases.push_back({l.tenant, l.slots, span});
  }
  for (const auto& [tenant, spans] : held_by) out.tenants[tenant].node_seconds += length_of(tracing::merge_intervals(spans));
  // Idle: the gaps between the merged leases and after the last, each the tenant's whose lease ended
  // when the gap began (the first by name when several did).
  const auto busy = tracing::merge_intervals(held);
  for (std::size_t i = 0; i < busy.size(); ++i) {
    const double gap = (i + 1 < busy.size() ? busy[i + 1].begin : life.end) - busy[i].end;
    if (gap <= 0) continue;
    const std::string* who = nullptr;
    for (const auto& l : leases)
      if (l.span.end == busy[i].end && (!who || l.tenant < *who)) who = &l.tenant;
    out.pool.idle_node_seconds += gap;
    if (who) out.tenants[*who].idle_node_seconds += gap;
  }
}

void summarise_waits(std::vector<double> waits, pool_figures& f) {
  std::sort(waits.begin(), waits.end());
  f.wait_p50 = tracing::nearest_rank(waits, 50);
  f.wait_p95 = tracing::nearest_rank(waits, 95);
  f.wait_max = waits.empty() ? 0 : waits.back();
  f.wait_mean = waits.empty() ? 0 : std::accumulate(waits.begin(), waits.end(), 0.0) / static_cast<double>(waits.size());
}

double utilisation(double slot_seconds, double node_seconds, int node_slots) {
  return node_seconds > 0 ? slot_seconds / (node_seconds * node_slots) : 0;
}

}  // namespace

pool_stats compute_pool_stats(const tracing::trace_set& traces, const std::vector<tracing::task_tree>& tasks,
                              const pool_stats_settings& settings) {
  pool_stats out;
  out.settings = settings;
  auto seen = observe(tasks);
  double traces_end = -std::numeric_limits<double>::infinity();
  for (const auto& m : traces.messages) traces_end = std::max(traces_end, m.timestamp);
  out.releases = seen.releases;
  out.node_left = seen.left.size();

  std::vector<double> waits;
  std::map<std::string, std::vector<double>> waits_by;
  std::map<std::string, std::vector<node_event>> events;
  for (auto& a : seen.acquires) {
    if (a.tenant.empty()) a.tenant = "-";
    auto& f = out.tenants[a.tenant];
    for (auto* figures : {&out.pool, &f}) {
      ++figures->acquires;
      if (a.outcome == "failed" || a.outcome == "cancelled") ++figures->failed;
      if (a.outcome == "started") ++figures->unfinished;
    }
    waits.push_back(a.span.length());
    waits_by[a.tenant].push_back(a.span.length());
    if (a.outcome != "succeeded" || a.node.empty()) continue;
    ++out.leases;
    const auto released = seen.released.find(a.lease_id);
    const double end = released != seen.released.end() ? released->second : a.unreleased_end;
    auto& node = events[a.node];
    if (a.joined) node.push_back({node_event::join, a.span.begin, {}});
    node.push_back({node_event::lease, a.span.end, {a.tenant, a.slots, {a.span.end, std::max(end, a.span.end)}}});
  }
  for (auto& [node, at] : seen.left) events[node].push_back({node_event::left, at, {}});

  for (auto& [node, list] : events)
    for (const auto& life : lives_of(std::move(list), settings, traces_end)) {
      ++out.nodes;
      account(life, out);
    }

  summarise_waits(std::move(waits), out.pool);
  out.pool.utilisation = utilisation(out.pool.leased_slot_seconds, out.pool.node_seconds, settings.node_slots);
  for (auto& [tenant, f] : out.tenants) {
    summarise_waits(std::move(waits_by[tenant]), f);
    f.utilisation = utilisation(f.leased_slot_seconds, f.node_seconds, settings.node_slots);
  }
  return out;
}

}  // namespace ferry::agent::pool
