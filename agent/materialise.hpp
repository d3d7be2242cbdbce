#pragma once
// Making a run's layers present on a node before its command runs: one exec per node of the node program
// (agent/node/, put there first when the node lacks this build: agent/node_program.hpp), with the plan as
// JSON lines on its stdin, each layer's line as soon as the layer is in storage (agent/layer_feed.hpp). The node program streams each missing layer's shards from their presigned URLs,
// checks them against the manifest's SHA-256, sizes and file counts, extracts them with names kept byte
// for byte and every entry confined to its layer, and keeps them in its layer cache for later runs
// (agent/node/layer_cache.hpp: per-layer locks, markers, least recently used layers evicted beyond
// nodes.cache_size). The node needs nothing installed but `sh`, `cat`, `mkdir` and `chmod`.
//
// The node program's stdout is Eliot messages continuing this action's task: they go, as they arrive, to
// the node's own trace file beside ferry's (<trace>.node-<node>-<n>.jsonl: each process writes its own
// file), and its root action's end says what the node now holds:
//   ferry:materialise {node}                             here (with an ssh:exec of `ferry-node version`
//                                                        first while the feed is open)
//     ferry:node:materialise {layers}                    on the node (tracing/action_types.hpp)
//       ferry:materialise:layer {layer, name}            cached=true, or fetched
//         ferry:materialise:lock, :attempt {attempt}
//           ferry:materialise:shard {shard, bytes}       downloaded, entries
// No credentials travel and none is traced: the URLs are presigned, go on stdin, never into an argv or a
// file, and the plan is not written to the trace.
#include "agent/layer_feed.hpp"
#include "agent/node/plan.hpp"
#include "agent/node_program.hpp"
#include "config/settings.hpp"
#include "net/ssh_session.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ferry::agent {

namespace asio = boost::asio;

using node::environment_plan;
using node::layer_source;
using node::shard_source;

struct materialise_options {
  node::node_limits limits;  // deadlines, attempts and parallelism the node program works within
  std::string cache_dir;     // on the node; empty: ${XDG_CACHE_HOME:-$HOME/.cache}/ferry
  std::uint64_t cache_cap = 0;  // nodes.cache_size: least recently used layers beyond it are evicted
  std::shared_ptr<const node_program> program;  // must be set: load_node_program()
  // PATH for ferry's commands on the node; empty: the login's. Tests narrow it to show what a node needs.
  std::string node_path;

  // The limits from config (net.connect_timeout, agent.download_timeout as the read deadline,
  // net.retry.*, agent.cache_lock_timeout, agent.download_parallelism) and nodes.cache_size; the program
  // is left unset.
  static materialise_options from(const config::settings& settings);
};

struct environment {                     // what the node now holds for this plan
  std::string workdir;                   // absolute path on the node
  std::vector<std::string> python_path;  // absolute layer dirs, in plan order
  std::size_t layers_cached = 0, layers_fetched = 0;
  std::uint64_t bytes_fetched = 0;
  std::size_t layers_evicted = 0;
};

// Runs the plan on the node behind `session` and reports what it holds. Fails with the node program's
// own error (agent/node/error.hpp: a download's HTTP failure, a digest mismatch, a hostile entry, a full
// disk, a lock's timeout...) with its words in the diagnostics, with net::errc when the session fails,
// and with operation_aborted when cancelled: the node program is then stopped, and what it left half
// made is never taken for a layer.
// The layers come from `feed` as they reach storage: the node starts on each one as it comes.
asio::awaitable<result<environment>> materialise(tracing::action& parent, net::ssh_session& session,
                                                 layer_feed& feed, const materialise_options& options,
                                                 diagnostics& diag);
// A whole plan at once (its cache_dir and cache_cap instead of the options').
asio::awaitable<result<environment>> materialise(tracing::action& parent, net::ssh_session& session,
                                                 const environment_plan& plan, const materialise_options& options,
                                                 diagnostics& diag);

}  // namespace ferry::agent
