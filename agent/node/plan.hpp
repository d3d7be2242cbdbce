#pragma once
// What ferry asks of the node program, as the JSON document it sends on stdin: the layers of a run, each
// with its shards behind presigned URLs (credentials never reach a node) and the SHA-256, size, file count
// and content bytes the manifest gives each shard's zip; where the node's cache lives and how large it may
// grow; the limits and deadlines of the work; and the eliot task the node's own actions continue.
// Both halves of the agent read this header: ferry writes the document, the node program parses it.
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent::node {

struct shard_source {
  std::string url;              // presigned GET, as the node reaches storage
  std::string sha256;           // hex SHA-256 of the zip's bytes
  std::uint64_t bytes = 0;      // the zip's size
  std::uint64_t files = 0;      // entries it holds, from the manifest (0: not said)
  std::uint64_t content = 0;    // bytes its files hold, from the manifest (0 with files 0: not said)
};

struct layer_source {
  std::string id;                    // hex layer id: the cache directory's name
  std::string name;                  // "workspace", "numpy", ... for messages and the trace
  std::vector<shard_source> shards;  // all extract into the same directory; none: an empty layer
};

struct node_limits {
  std::int64_t connect_timeout_ms = 10'000;
  std::int64_t read_timeout_ms = 60'000;     // one read of a download
  std::int64_t lock_timeout_ms = 600'000;    // waiting for another run's lock on a layer
  int attempts = 3;                          // per layer, the first included
  std::int64_t retry_base_ms = 100;
  std::int64_t retry_max_ms = 5'000;
  int parallelism = 8;                       // shards downloading at once
  std::uint64_t range_size = 8 << 20;        // a shard over this comes in ranged GETs of this size
  std::uint64_t max_shard_content = 0;       // cap on what one shard may expand to; 0: none
};

struct environment_plan {
  std::vector<layer_source> layers;      // in sys.path (PYTHONPATH) order
  std::optional<std::size_t> workspace;  // index of the workspace layer: the command's working directory
  std::string cache_dir;                 // on the node; empty: ${XDG_CACHE_HOME:-$HOME/.cache}/ferry
  std::uint64_t cache_cap = 0;           // least recently used layers beyond it are evicted; 0: no cap
  std::string task_id;                   // eliot's serialised task id the node's actions continue
  node_limits limits;
};

// Checks what the node relies on (hex ids and digests, URLs without line breaks, a workspace index
// inside the plan); errc::bad_plan naming the layer otherwise.
result<void> check_plan(const environment_plan& plan, diagnostics& diag);

std::string plan_json(const environment_plan& plan);
result<environment_plan> parse_plan(std::string_view text, diagnostics& diag);

}  // namespace ferry::agent::node
