#include "tracing/trace_stats.hpp"

#include "tracing/action_types.hpp"

#include <algorithm>
#include <map>

namespace ferry::tracing {
namespace {

double share_within(const std::vector<double>& values, double limit) {
  if (values.empty()) return 0;
  const auto n = std::count_if(values.begin(), values.end(), [&](double v) { return v <= limit; });
  return static_cast<double>(n) / static_cast<double>(values.size());
}

bool has_both_ends(const tree_node& n) { return n.start && n.end; }

struct type_accumulator {
  std::size_t count = 0;
  std::size_t failures = 0;
  std::size_t cancelled = 0;
  std::size_t incomplete = 0;
  std::vector<double> durations;
};

// Everything one job's subtree says about its tasks and nodes, gathered in one walk.
class job_scanner {
 public:
  job_scanner(const trace_conventions& conventions, job_stats& job) : conventions_(conventions), job_(job) {}

  void scan(const tree_node& n, const interval& time) {
    for (const auto* m : {n.start, n.end, n.message})
      if (m) note_node(conventions_.node_in(m->fields), m->timestamp);
    if (n.is_action()) action(n, time);
    for (const auto& [_, child] : n.children) scan(*child, child->is_action() ? action_interval(*child, time) : time);
  }

  void finish() {
    for (auto& [node, seen] : nodes_) {
      job_.nodes.push_back(measure_node(node, seen, job_.time.end));
      job_.usage.add(job_.nodes.back());
    }
    job_.pending_summary = summarise_pending(job_.pending);
    job_.overlap = overlap_.finish();
  }

 private:
  void note_node(const std::string& node, double when) {
    if (node.empty()) return;
    auto [it, inserted] = nodes_.try_emplace(node, node_observations{when, std::nullopt, {}});
    if (!inserted) it->second.first_seen = std::min(it->second.first_seen, when);
  }

  void action(const tree_node& n, const interval& time) {
    const auto type = n.type();
    overlap_.action(n, time);
    if (conventions_.is_task(type)) task(n, time);
    if (conventions_.is_node_release(type)) release(n, time);
  }

  void task(const tree_node& n, const interval& time) {
    ++job_.tasks;
    if (n.outcome() == "failed") ++job_.failed_tasks;
    if (n.outcome() == "cancelled") ++job_.cancelled_tasks;
    if (!has_both_ends(n)) ++job_.incomplete_tasks;
    if (const auto node = conventions_.node_of(n); !node.empty()) {
      note_node(node, time.begin);
      nodes_.at(node).tasks.push_back(time);
    }
    if (const auto submitted = conventions_.submitted_at(n); submitted && n.start)
      job_.pending.push_back(std::max(0.0, n.start->timestamp - *submitted));
  }

  void release(const tree_node& n, const interval& time) {
    const auto node = conventions_.node_of(n);
    if (node.empty()) return;
    note_node(node, time.begin);
    // A release that never ended may not have happened: the node counts as provisioned to the job's end.
    if (!n.end) return;
    auto& released = nodes_.at(node).released;
    released = std::min(released.value_or(n.end->timestamp), n.end->timestamp);
  }

  const trace_conventions& conventions_;
  job_stats& job_;
  std::map<std::string, node_observations> nodes_;
  fetch_overlap_scanner overlap_;
};

class stats_builder {
 public:
  stats_builder(const trace_set& traces, const trace_conventions& conventions)
      : traces_(traces), conventions_(conventions) {}

  void task(const task_tree& t) {
    ++out_.eliot_tasks;
    if (!t.complete()) out_.incomplete_eliot_tasks.push_back(t.uuid);
    const auto whole = extent(*t.root);
    visit(t, *t.root, t.root->is_action() ? action_interval(*t.root, whole) : whole, false);
  }

  trace_stats finish() {
    out_.files = traces_.files.size();
    out_.messages = traces_.messages.size();
    out_.problems = traces_.problems;
    for (auto& [type, acc] : types_)
      out_.action_types.push_back({type, acc.count, acc.failures, acc.cancelled, acc.incomplete,
                                    summarise(std::move(acc.durations))});
    std::stable_sort(out_.jobs.begin(), out_.jobs.end(),
                     [](const job_stats& a, const job_stats& b) { return a.time.begin < b.time.begin; });
    sum_jobs();
    return std::move(out_);
  }

 private:
  void visit(const task_tree& t, const tree_node& n, const interval& time, bool in_job) {
    if (n.is_action()) count(n);
    if (!in_job && n.is_action() && n.start && conventions_.is_job(n.type())) {
      job(t, n, time);
      in_job = true;
    }
    for (const auto& [_, child] : n.children)
      visit(t, *child, child->is_action() ? action_interval(*child, time) : time, in_job);
  }

  void count(const tree_node& n) {
    const auto type = n.type();
    if (type.empty()) return;  // a level no message of which is in these files
    auto it = types_.find(type);
    if (it == types_.end()) it = types_.emplace(std::string(type), type_accumulator{}).first;
    auto& acc = it->second;
    ++acc.count;
    if (n.outcome() == "failed") ++acc.failures;
    if (n.outcome() == "cancelled") ++acc.cancelled;
    if (auto d = n.duration())
      acc.durations.push_back(*d);
    else
      ++acc.incomplete;
  }

  // A job's tenant on a team pool: its own field `tenant`, else that of its first lease
  // (ferry:pool:acquire), in the order the actions started.
  static std::string tenant_of(const tree_node& n) {
    if (const auto* tenant = n.field("tenant"); tenant && tenant->is_string()) return std::string(tenant->as_string());
    for (const auto& [_, child] : n.children) {
      if (child->type() != action_types::pool::acquire && child->children.empty()) continue;
      if (auto found = tenant_of(*child); !found.empty()) return found;
    }
    return {};
  }

  void job(const task_tree& t, const tree_node& n, const interval& time) {
    job_stats j;
    j.action_type = std::string(n.type());
    j.task_uuid = t.uuid;
    j.level = n.level_text();
    j.file = traces_.files[n.start->file].string();
    j.status = std::string(n.outcome());
    j.tenant = tenant_of(n);
    j.complete = n.complete();
    j.time = time;
    job_scanner scanner(conventions_, j);
    scanner.scan(n, time);
    scanner.finish();
    j.path = find_critical_path(n, time, conventions_);
    out_.jobs.push_back(std::move(j));
  }

  void sum_jobs() {
    std::map<std::string, std::vector<double>> pending_by_type;
    std::map<std::string, job_type_stats> by_type;
    for (const auto& j : out_.jobs) {
      auto& s = by_type[j.action_type];
      s.action_type = j.action_type;
      ++s.jobs;
      if (j.status == "failed") ++s.failed;
      if (j.status == "cancelled") ++s.cancelled;
      if (!j.complete) ++s.incomplete;
      s.tasks += j.tasks;
      s.usage.add(j.usage);
      out_.usage.add(j.usage);
      auto& pending = pending_by_type[j.action_type];
      pending.insert(pending.end(), j.pending.begin(), j.pending.end());
      out_.pending.insert(out_.pending.end(), j.pending.begin(), j.pending.end());
    }
    for (auto& [type, s] : by_type) {
      s.pending = summarise_pending(pending_by_type[type]);
      out_.job_types.push_back(std::move(s));
    }
    out_.pending_summary = summarise_pending(out_.pending);
  }

  const trace_set& traces_;
  const trace_conventions& conventions_;
  std::map<std::string, type_accumulator, std::less<>> types_;
  trace_stats out_;
};

}  // namespace

pending_stats summarise_pending(const std::vector<double>& seconds) {
  return {summarise(seconds), share_within(seconds, 2), share_within(seconds, 5), share_within(seconds, 60)};
}

trace_stats compute_stats(const trace_set& traces, const std::vector<task_tree>& tasks,
                          const trace_conventions& conventions) {
  stats_builder builder(traces, conventions);
  for (const auto& t : tasks) builder.task(t);
  return builder.finish();
}

}  // namespace ferry::tracing
