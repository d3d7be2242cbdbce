#pragma once
// What ferry asks of `ferry-node stage`, as JSON lines on stdin (a header, then a line per object): the objects under a storage prefix
// (each behind a presigned URL, so no credential reaches the node, with the size and ETag the listing
// gave), the node directory they go to, the window that bounds what waits there unread (0: everything,
// before the command), and the limits and eliot task of the work. Both halves of the agent read this
// header: ferry writes the document, the node program parses it.
#include "agent/node/plan.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent::node {

struct stage_object {
  std::string path;  // under the node directory: the key without the prefix
  std::string url;   // presigned GET, as the node reaches storage
  std::uint64_t size = 0;
  std::string etag;  // without quotes: an MD5 in hex, or a multipart ETag ("...-N", checked by size only)
};

struct stage_request {
  std::string task_id;   // eliot's serialised task id the node's actions continue
  std::string source;    // "s3://BUCKET/PREFIX", for messages
  std::string node_dir;  // absolute
  std::uint64_t window = 0;
  node_limits limits;    // parallelism: objects downloading at once (without a window)
  std::vector<stage_object> objects;  // in delivery order
  // A pool tenant's Unix user (tenant_user.hpp): the program becomes that user before it writes anything,
  // so the data lands only where the tenant may write, as its own (0700 directories, 0600 files). Empty:
  // the login user.
  std::string tenant;
};

// The whole request: {"stage":{task_id, source, node_dir, window, limits, objects: N}} and then N lines
// {"object":{path, url, size, etag}}, each ending in a newline.
std::string stage_lines(const stage_request& request);

// The header line: the request without its objects, and how many object lines follow.
result<std::pair<stage_request, std::size_t>> parse_stage_header(std::string_view line, diagnostics& diag);
// Object line `index` (from 0). errc::bad_plan naming what is wrong: a path that is absolute, holds `..`,
// `.` or an empty component, or falls among the staging's own `.ferry-stage*`; a URL with a line break.
result<stage_object> parse_stage_object(std::string_view line, std::size_t index, diagnostics& diag);

}  // namespace ferry::agent::node
