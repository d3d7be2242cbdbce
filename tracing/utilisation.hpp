#pragma once
// Node utilisation: how much of the node time a job provisioned ran tasks. Per node, provisioned time runs
// from the first message naming the node to the job's end (or the node's release, if earlier); busy time
// is the union of its tasks' intervals inside that (see trace_conventions.hpp). Overlapping tasks on one
// node count once: a node running two tasks at a time is busy, not twice busy.
#include "tracing/action_interval.hpp"

#include <optional>
#include <string>
#include <vector>

namespace ferry::tracing {

// What a job's trace says about one node.
struct node_observations {
  double first_seen = 0;           // the first message naming it
  std::optional<double> released;  // the end of the first release (terminate) action naming it
  std::vector<interval> tasks;     // the intervals of the tasks that ran on it
};

struct node_usage {
  std::string node;
  interval provisioned;
  std::vector<interval> busy;  // disjoint, in time order, inside `provisioned`

  double provisioned_seconds() const { return provisioned.length(); }
  double busy_seconds() const;
};

struct utilisation {
  double provisioned_node_seconds = 0;
  double busy_node_seconds = 0;

  bool measured() const { return provisioned_node_seconds > 0; }
  double ratio() const { return measured() ? busy_node_seconds / provisioned_node_seconds : 0; }
  double overhead() const { return measured() ? 1 - ratio() : 0; }
  void add(const node_usage& u);
  void add(const utilisation& u);
};

node_usage measure_node(std::string node, const node_observations& seen, double job_end);

// The union of intervals: disjoint, in time order; touching intervals become one.
std::vector<interval> merge_intervals(std::vector<interval> spans);

// From `time` on (until the next point), so many nodes were provisioned and so many busy.
struct node_count {
  double time = 0;
  int provisioned = 0;
  int busy = 0;
};

// The step function of provisioned and busy nodes over all these usages: a point at each time a count
// changes, holding the counts after every change at that time (so the last point is 0 and 0).
std::vector<node_count> nodes_over_time(const std::vector<const node_usage*>& usages);

}  // namespace ferry::tracing
