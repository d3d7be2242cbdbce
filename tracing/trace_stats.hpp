#pragma once
// `ferry trace stats`: where the time went, across any number of runs and maps. Per action type: counts,
// failures and duration percentiles. Per job (a run or a map, see trace_conventions.hpp): how long its
// tasks waited to start, how much of the node time it provisioned ran tasks, how much of its nodes' fetching
// overlapped its pack, and its critical path. Then
// the same summed per job type and over everything. Callable from tests of real runs, which check that the
// numbers add up: a job's critical path totals its duration, and busy never exceeds provisioned.
#include "tracing/critical_path.hpp"
#include "tracing/fetch_overlap.hpp"
#include "tracing/percentiles.hpp"
#include "tracing/trace_conventions.hpp"
#include "tracing/utilisation.hpp"

#include <string>
#include <vector>

namespace ferry::tracing {

struct action_type_stats {
  std::string action_type;
  std::size_t count = 0;       // actions of this type
  std::size_t failures = 0;    // ended as failed, not cancelled
  std::size_t cancelled = 0;   // ended as failed with reason "cancelled" (tree_node::outcome)
  std::size_t incomplete = 0;  // a start or an end message is not in these files
  percentiles duration;        // seconds, over the actions with both
};

// The pending time of tasks: from submission (submitted_at) to start. Tasks without submitted_at are not in it.
struct pending_stats {
  percentiles seconds;
  double within_2s = 0;  // the share of these tasks that waited at most 2 s
  double within_5s = 0;
  double within_60s = 0;
};

struct job_stats {
  std::string action_type;  // ferry:run or ferry:map
  std::string task_uuid;
  std::string level;        // the job action's place in its task, "/" for a task's root
  std::string file;         // the trace file its start message is in
  std::string status;       // succeeded, failed, cancelled, or started (no end message)
  std::string tenant;       // its field `tenant` (a job on a team's pool); empty without one
  bool complete = false;    // the job and every action in it have both messages, no level missing
  interval time;            // unix times; an incomplete job ends with its task's last message
  std::size_t tasks = 0;    // ferry:agent:task actions in it
  std::size_t failed_tasks = 0;     // not counting cancelled ones
  std::size_t cancelled_tasks = 0;
  std::size_t incomplete_tasks = 0;
  std::vector<double> pending;  // seconds, of each task with submitted_at, in the order met
  pending_stats pending_summary;
  std::vector<node_usage> nodes;  // by node id
  utilisation usage;
  critical_path path;
  fetch_overlap overlap;  // how much of the nodes' fetching overlapped the job's pack
};

// Jobs of one action type, summed.
struct job_type_stats {
  std::string action_type;
  std::size_t jobs = 0;
  std::size_t failed = 0;
  std::size_t cancelled = 0;
  std::size_t incomplete = 0;
  std::size_t tasks = 0;
  pending_stats pending;
  utilisation usage;
};

struct trace_stats {
  std::size_t files = 0;
  std::size_t messages = 0;
  std::size_t eliot_tasks = 0;                 // task_uuids
  std::vector<std::string> incomplete_eliot_tasks;  // their uuids
  std::vector<std::string> problems;           // "file:line: why" for each skipped line
  std::vector<action_type_stats> action_types;  // sorted by type
  std::vector<job_stats> jobs;                  // by start time
  std::vector<job_type_stats> job_types;        // sorted by type
  std::vector<double> pending;                  // every job's task pending times
  pending_stats pending_summary;
  utilisation usage;  // over every job
};

pending_stats summarise_pending(const std::vector<double>& seconds);

trace_stats compute_stats(const trace_set& traces, const std::vector<task_tree>& tasks,
                          const trace_conventions& conventions = {});

}  // namespace ferry::tracing
