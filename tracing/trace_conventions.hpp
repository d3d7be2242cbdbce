#pragma once
// What `ferry trace stats` and `ferry trace html` read from a trace beyond eliot's own fields. The run, map
// and provisioning code writes these; the statistics find them wherever they sit in the tree (any depth,
// any file, a task continued by another process), so no producer's call structure is assumed.
//
// Action types (exact; tracing/action_types.hpp names every one):
//   ferry:run               a job: a whole `ferry run`
//   ferry:map               a job: one map over many inputs
//   ferry:agent:task        one task of a map, or a run's command, on one node
//   ferry:provision:terminate   ends a node's provisioned time at its end (one that never ended does not);
//                           written around every provider's own end (ec2:terminate, ferry:local:terminate,
//                           ferry:ssh:release)
// Also written, and shown like any other action: ferry:provision (a job's round of nodes), its
// ferry:provision:create and ferry:provision:node (one node's life from create to ready), ferry:node:ready
// with its ferry:node:wait_running and ferry:node:wait_ssh stages, ferry:materialise (per node) and the
// node program's ferry:node:materialise with its ferry:materialise:* steps.
//
// Fields:
//   node          string (or integer) node id, in the start message of any action or in any message that
//                 concerns one node. The first message naming a node inside a job starts that node's
//                 provisioned time, so `ferry:provision:node` carries it from its start, before the create
//                 call, and a node taken from a warm pool starts when the job first names it.
//   submitted_at  float unix time at which a task was queued, in the start message of `ferry:agent:task`.
//                 pending = the task's start timestamp - submitted_at (negative values, clock skew, count as 0).
//
// Jobs: the outermost `ferry:run` and `ferry:map` actions whose start message is present. A job nested in
// another one (a map started by a run's command) belongs to the outer job: its tasks and nodes count there.
//
// Times as far as the trace tells: an action without an end message (a crash, a killed node) lasts until
// its parent's end, and one at the top of its eliot task until the task's last message. A child is
// clipped to its parent's interval. Such actions are reported as incomplete, never dropped. (The critical
// path, critical_path.hpp, instead ends them with their own last message.)
//
// Node utilisation, per job and node:
//   provisioned  from the first message naming the node in the job to the job's end, or to the end of the
//                first `ferry:provision:terminate` naming it, whichever is earlier;
//   busy         the union over time of the intervals of `ferry:agent:task` actions naming the node,
//                clipped to its provisioned time (so busy <= provisioned even across skewed clocks);
//   utilisation  = sum of busy node-seconds / sum of provisioned node-seconds; overhead = 1 - utilisation.
//
// Background servers: actions that run beside the work and end when told to, not when the work needs them
// to (a node's `ferry-node serve` handing shards to its peers, ferry's side of it, a forwarded port and its
// connections). No job waits for one, so the critical path never takes one for a link; its time is the
// parent's own time or another child's.
//
// The constants are the defaults of `trace_conventions`; a caller may pass others (an older trace's names).
#include "tracing/action_types.hpp"
#include "tracing/task_tree.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::tracing {

struct trace_conventions {
  std::vector<std::string> job_types = {std::string(action_types::run::job), std::string(action_types::map::job),
                                         std::string(action_types::api::job)};
  std::vector<std::string> task_types = {std::string(action_types::agent::task)};
  std::vector<std::string> node_release_types = {std::string(action_types::provision::terminate)};
  std::vector<std::string> background_types = {std::string(action_types::agent::serve),
                                               std::string(action_types::node::serve),
                                               std::string(action_types::cluster::forwarding),
                                               std::string(action_types::ssh::forward)};
  std::string node_field = "node";
  std::string submitted_at_field = "submitted_at";

  bool is_job(std::string_view type) const { return contains(job_types, type); }
  bool is_task(std::string_view type) const { return contains(task_types, type); }
  bool is_node_release(std::string_view type) const { return contains(node_release_types, type); }
  bool is_background(std::string_view type) const { return contains(background_types, type); }
  // The node a message names ("" when none); an integer id is written in decimal.
  std::string node_in(const boost::json::object& fields) const;
  // The node an action (its start, else its end message) or a plain message names.
  std::string node_of(const tree_node& n) const;
  // A task's submission time, when its messages carry one.
  std::optional<double> submitted_at(const tree_node& n) const;

 private:
  static bool contains(const std::vector<std::string>& list, std::string_view type) {
    for (const auto& t : list)
      if (t == type) return true;
    return false;
  }
};

}  // namespace ferry::tracing
