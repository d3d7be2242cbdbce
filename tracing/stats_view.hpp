#pragma once
// `ferry trace stats` output: a text report for people, and JSON (--json) with every figure for scripts.
// The JSON mirrors trace_stats.hpp: {files, messages, eliot_tasks, incomplete_eliot_tasks, problems,
// action_types: [{action_type, count, failures, incomplete, duration: {count, p50, p90, p99, max}}],
// job_types: [{action_type, jobs, failed, incomplete, tasks, pending, utilisation}], pending, utilisation,
// jobs: [{action_type, task_uuid, level, file, status, complete, start, end, duration, tasks, failed_tasks,
// incomplete_tasks, pending, utilisation, nodes: [{node, provisioned_from, provisioned_to,
// provisioned_seconds, busy_seconds}], critical_path: [{action_type, level, node, status, depth, begin, end,
// duration, share}]}]}, where pending is {count, p50, p90, p99, max, within_2s, within_5s, within_60s} and
// utilisation {busy_node_seconds, provisioned_node_seconds, utilisation, overhead} (null when no node).
// Times are unix seconds, durations seconds, shares fractions of 1.
#include "tracing/trace_stats.hpp"

#include <boost/json/value.hpp>

#include <string>

namespace ferry::tracing {

std::string render_stats(const trace_stats& stats);

boost::json::value stats_to_json(const trace_stats& stats);

}  // namespace ferry::tracing
