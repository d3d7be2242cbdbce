#pragma once
// The time an action covers, as far as the trace tells. A crashed process or a killed node leaves actions
// without an end message; they are kept, and last until their parent ends (see trace_conventions.hpp).
#include "tracing/task_tree.hpp"

namespace ferry::tracing {

struct interval {
  double begin = 0;
  double end = 0;

  double length() const { return end - begin; }
};

// The earliest and latest timestamps of any message in the subtree.
interval extent(const tree_node& n);

// From the action's start message (without one: its first message) to its end message (without one: the
// parent's end), clipped to `parent`: the parent action's interval, or the task's extent for a top action.
interval action_interval(const tree_node& n, const interval& parent);

// As action_interval, except that an action without an end message ends with its last message here: what
// the trace knows it did. The critical path uses it, so that a task lost with a killed node is not taken
// for what its job waited for when the job went on and finished without it.
interval known_interval(const tree_node& n, const interval& parent);

}  // namespace ferry::tracing
