#pragma once
// Making a run's layers present on a node before its command runs: one exec per node, whose stdin is a
// POSIX sh script (agent/materialise_script.inc) holding the plan. The node needs sh, curl, and unzip or
// python3; it downloads each missing layer's shards from their presigned URLs, checks their SHA-256,
// unzips them, and keeps them in its layer cache for later runs, evicting the least recently used
// layers beyond nodes.cache_size.
//
// The node's cache: <cache>/layers/<id>/ holds a layer's files; <cache>/layers/<id>.done is its completion
// marker, written (renamed into place) only after the directory itself was renamed into place, holding
// the layer's size on disk; its mtime is the layer's last use. A layer is cached exactly when its marker
// exists. Every run takes the cache's lock (flock, or an atomic mkdir where util-linux is missing) for
// the whole of its work, so runs that share a node share its cache, each layer is downloaded once, and
// nobody sees a half-written layer. Downloads of different layers run in parallel.
//
// The script reports every step on stdout (agent/materialise_progress.hpp); ferry reads the lines as they
// arrive and traces them live:
//   ferry:materialise {node, layers}
//     ferry:materialise:lock                      waiting for and taking the cache's lock
//     ferry:materialise:layer {layer, name}       one per layer: succeeded with cached=true, or fetched
//       ferry:materialise:download {shard}        each succeeded with its bytes, or failed with the
//       ferry:materialise:verify {shard}          node's message
//       ferry:materialise:unzip {shard}
//   and messages ferry:materialise:cache {cache_dir}, ferry:materialise:evicted {layer, disk_bytes},
//   ferry:materialise:failed {step, reason} (the cache as a whole) and ferry:materialise:malformed {line}.
// No credentials travel: the URLs are presigned, and neither the script nor its URLs are traced.
#include "config/settings.hpp"
#include "net/ssh_session.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ferry::agent {

namespace asio = boost::asio;

struct shard_source {
  std::string url;          // presigned GET, as the node reaches storage
  std::string sha256;       // hex SHA-256 of the zip bytes
  std::uint64_t bytes = 0;  // zip size
};

struct layer_source {
  std::string id;                    // hex layer id: the cache directory's name
  std::string name;                  // "workspace", "numpy", ... for messages and the trace
  std::vector<shard_source> shards;  // all unzip into the same directory; none: an empty layer
};

struct environment_plan {
  std::vector<layer_source> layers;      // in sys.path (PYTHONPATH) order
  std::optional<std::size_t> workspace;  // index of the workspace layer: the command's working directory
  std::string cache_dir;                 // on the node; empty: ${XDG_CACHE_HOME:-$HOME/.cache}/ferry
  std::uint64_t cache_cap = 0;           // nodes.cache_size: least recently used layers beyond it are
                                         // evicted; 0: no cap
};

struct materialise_options {
  config::duration connect_timeout{};   // curl's connect timeout (net.connect_timeout)
  config::duration download_timeout{};  // curl's deadline for one shard, per attempt (agent.download_timeout)
  int download_attempts = 1;            // attempts per shard, the first included (net.retry.max_attempts)
  config::duration lock_timeout{};      // waiting for another run's lock on the cache (agent.cache_lock_timeout)
  int parallelism = 1;                  // layers downloading at once on one node (agent.download_parallelism)
  // The node's command that runs the script read from stdin. Tests set PATH or name another shell here.
  std::string shell_command = "sh -s";

  static materialise_options from(const config::settings& settings);
};

struct environment {                     // what the node now holds for this plan
  std::string workdir;                   // absolute path on the node
  std::vector<std::string> python_path;  // absolute layer dirs, in plan order
  std::size_t layers_cached = 0, layers_fetched = 0;
  std::uint64_t bytes_fetched = 0;
  std::size_t layers_evicted = 0;
};

// Runs the plan on the node behind `session` and reports what it holds. Fails with an agent::errc whose
// diagnostics name the node-side cause (a missing tool, a download's HTTP failure and the layer, a digest
// mismatch, the lock's timeout, unzip's words on a full disk...), with net::errc when the session fails,
// and with operation_aborted when cancelled: the node's script is then killed, and what it left half made
// is removed (by its own trap, else by the next run under the lock), never taken for a layer.
asio::awaitable<result<environment>> materialise(tracing::action& parent, net::ssh_session& session,
                                                 const environment_plan& plan, const materialise_options& options,
                                                 diagnostics& diag);

// The same plan as the script text ferry sends, for tests and `--explain`-like output. The plan must be
// valid (see check_plan); each layer id appears in it once.
std::string materialise_script(const environment_plan& plan, const materialise_options& options);

// Whether the plan can go into a script: hex ids and digests, URLs and a cache dir without NUL or newline,
// a workspace index inside the plan. Fails with errc::invalid_plan naming the layer.
result<void> check_plan(const environment_plan& plan, diagnostics& diag);

}  // namespace ferry::agent
