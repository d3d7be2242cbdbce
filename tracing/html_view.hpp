#pragma once
// `ferry trace html`: one self-contained HTML file (inline CSS and JS, nothing fetched) with a zoomable
// timeline of nested actions per process (trace file) and node, coloured by status (succeeded, failed,
// incomplete), each action's fields on hover; the statistics of trace_stats.hpp; a histogram of pending
// times; and the number of provisioned and busy nodes over time. Incomplete actions are drawn to the end
// of their parent (see trace_conventions.hpp) in their own colour; malformed lines are listed at the top.
#include "tracing/trace_stats.hpp"

#include <string>

namespace ferry::tracing {

std::string render_html(const trace_set& traces, const std::vector<task_tree>& tasks, const trace_stats& stats,
                        const trace_conventions& conventions = {});

}  // namespace ferry::tracing
