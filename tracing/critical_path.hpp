#pragma once
// The critical path of a job: the chain of actions that set its length. Walking back from the job's end:
// the child that ends last (at or before the current time) is the link before it, and the path continues
// inside that child the same way; then from that child's start, the next child that ends last, and so on.
// Time between links belongs to the parent (its own time: scheduling, waiting, work not in a child).
// Children that overlap a chosen link are off the path. The links tile the job's interval, so their
// durations add up to the job's duration and their shares (duration / job duration) to 1. Children's
// intervals are known_interval's (action_interval.hpp): one without an end message ends with its last
// message, so a task lost with a killed node does not pass for what the job waited for. Links of zero
// length are left out, and adjacent stretches of one action's own time are one link.
//
// Two folds keep the path readable. A background server (trace_conventions::is_background: a node's
// `ferry-node serve`, a forwarded port) is never a link: it ends when told to, not when the work is done.
// And consecutive links too short to print (under half a millisecond, "0.000 s": a run's hundreds of
// file hashes) that succeeded become one link with `folded` = how many; a failed, cancelled or incomplete
// one is never folded. A folded link keeps the first one's level and depth, and the action type they
// share ("" when they differ); the links still tile the job.
#include "tracing/action_interval.hpp"
#include "tracing/trace_conventions.hpp"

#include <string>
#include <vector>

namespace ferry::tracing {

struct critical_link {
  std::string action_type;
  std::string level;      // the action's task_level, e.g. "/3/2"; "/" for a task's root action
  std::string node;       // the node the action (or its nearest ancestor naming one) was for
  std::string status;     // succeeded, failed, cancelled, or started (no end message: incomplete)
  std::size_t depth = 0;  // 0 for the job's own time, 1 for its children, ...
  double begin = 0;       // unix time
  double end = 0;
  double share = 0;       // duration / the job's duration
  std::size_t folded = 0; // 0, or the number of consecutive negligible links this one stands for

  double duration() const { return end - begin; }
};

struct critical_path {
  std::vector<critical_link> links;  // in time order

  // Under this, a link prints as 0.000 s: such links are folded together.
  static constexpr double negligible_seconds = 0.0005;

  double total() const;  // the sum of the links' durations: the job's duration
};

critical_path find_critical_path(const tree_node& job, const interval& job_interval,
                                 const trace_conventions& conventions = {});

}  // namespace ferry::tracing
