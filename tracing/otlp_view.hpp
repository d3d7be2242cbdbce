#pragma once
// `ferry trace otlp`: the traces as OTLP/JSON in the OpenTelemetry file-exporter format, one
// ExportTraceServiceRequest per line, for a collector's otlpjsonfile receiver (and from there Jaeger, Tempo,
// Honeycomb, Datadog...).
//
// - Each eliot task is one trace; each action (start or end message present) one span; each plain message
//   an event of the span it sits in. A message outside any action of these files (a task of its own, or
//   one under an action another file holds) has no span to go in and is left out (counted).
// - Ids are derived, so the same action always gets the same ids, whichever files are exported together:
//   traceId is the task's UUID (its 16 bytes), or for a task id that is not a UUID (nor the nil UUID)
//   FNV-1a-64 of "0:" + id and of "1:" + id, each through the SplitMix64 finalizer. spanId is
//   FNV-1a-64 + SplitMix64 of the eliot task id of the action, "<uuid>@<level>" ("T@/" for a task's root,
//   "T@/3/2" for the action whose messages are at [3,2,n]); an all-zero result becomes 1. The parent is the
//   action one level up, in whatever file or process it was written: a node's action continuing the task
//   under level [3,2] has the span of [3] as parent. The task's root has none. (Not cryptographic hashes:
//   tracing/ links no crypto library, and the ids only need to be deterministic and not collide by chance.)
// - One resource per trace file (a process): service.name "ferry-node" for the node program's files
//   (<stem>.node-*.jsonl), "ferry" for a file whose messages carry ferry_version (ferry's command roots),
//   "python" for one with an eliot:remote_task action (what Python's eliot writes when it continues a
//   task), else "ferry"; ferry.trace_file (the file's name), and service.version / process.pid when the
//   file's root says so.
// - Span kind CLIENT for calls to another machine (s3:request, an EC2 API call's attempt, ssh:connect, exec,
//   upload, download), INTERNAL otherwise.
// - Times in ns since 1970 (the eliot timestamp rounded to the microsecond, as the Chrome view does). Status
//   OK for succeeded, ERROR for failed with the reason (else the exception) as message and an "exception"
//   event. A cancelled action (failed with reason "cancelled", tree_node::outcome: a Ctrl-C, or a step a
//   finished race no longer needed) is no error: its status stays unset, as the specification asks of
//   anything not known to be an error, with ferry.cancelled = true and no exception event. An action
//   without an end lasts until the last message of the trace set, has no status and
//   ferry.incomplete = true (one without a start, which eliot never writes, starts at its end, likewise).
// - Fields become attributes: a few under their OpenTelemetry semantic-convention names (host ->
//   server.address, port -> server.port, bucket -> aws.s3.bucket, key -> aws.s3.key, part ->
//   aws.s3.part_number, operation -> rpc.method, exit_code -> process.exit.code, pid -> process.pid,
//   user -> user.name, region -> cloud.region, url -> url.full without its query, fragment and user info, so
//   no presigned query leaves), the rest as ferry.<field>, plus ferry.task_level. Nothing secret leaves: a
//   field whose name looks secret (json_text.hpp's is_secret_key, or X-Amz-*) is dropped at any depth
//   (droppedAttributesCount says how many), and every string passes redact_text again, for the files of
//   processes that are not ferry's.
// - Lines: the spans of one task, in tree order, up to max_line_bytes per line (the collector's
//   otlpjsonfile receiver reads lines up to its max_log_size, 1 MiB by default); a larger task is cut
//   into several lines, each a whole ExportTraceServiceRequest. Lines follow the order of the tasks.
#include "tracing/task_tree.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::tracing {

struct otlp_options {
  std::size_t max_line_bytes = 1000 * 1000;  // a single span larger than this still gets a line of its own
};

struct otlp_export {
  std::vector<std::string> lines;  // each one ExportTraceServiceRequest as JSON, without the newline
  std::size_t spans = 0;
  std::size_t events = 0;
  std::size_t left_out_messages = 0;  // plain messages with no exported action around them
};

otlp_export render_otlp(const trace_set& traces, const std::vector<task_tree>& tasks, const otlp_options& options = {});

// The ids as lowercase hex (32 and 16 digits), as the export writes them.
std::string otlp_trace_id(std::string_view task_uuid);
std::string otlp_span_id(std::string_view task_uuid, const std::vector<std::uint32_t>& level);

}  // namespace ferry::tracing
