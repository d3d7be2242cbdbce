#pragma once
// `ferry trace chrome`: Chrome trace-event JSON (the format Perfetto and chrome://tracing open). Each file
// is a process; each action is a complete ("X") event on a lane where it nests properly, so concurrent
// siblings get lanes of their own instead of overlapping.
#include "tracing/task_tree.hpp"

#include <boost/json/value.hpp>

namespace ferry::tracing {

boost::json::value render_chrome(const trace_set& traces, const std::vector<task_tree>& tasks);

}  // namespace ferry::tracing
