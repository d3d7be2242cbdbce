#pragma once
// Making a run's layers present on a node before its command runs: one exec per node of the node program
// (agent/node/, put there first when the node lacks this build: agent/provide/node_program.hpp), with the plan as
// JSON lines on its stdin, each layer's line as soon as the layer is in storage (agent/materialise/layer_feed.hpp). The node program streams each missing layer's shards from their presigned URLs,
// checks them against the manifest's SHA-256, the scan's sizes and file counts, and the shard ids this
// workstation computed from its own files (agent/node/id_check.hpp), extracts them with names kept byte
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
//             ferry:materialise:resume {attempt}          a cut download goes on with a Range request
// No credentials travel and none is traced: the URLs are presigned, go on stdin, never into an argv or a
// file, and the plan is not written to the trace.
#include "agent/materialise/layer_feed.hpp"
#include "agent/node/plan.hpp"
#include "agent/provide/node_program.hpp"
#include "net/async_event.hpp"
#include "config/settings.hpp"
#include "net/node_link.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
  // On a team pool's shared node: the tenant's Unix user there (agent/pool/tenant_name.hpp's
  // tenant_user_name), whom the node program makes on first use; environment layers then go to the node's
  // shared cache, and the workspace to the tenant's own (agent/node/tenant_account.hpp). Empty: no tenant.
  std::string tenant;

  // The limits from config (net.connect_timeout, agent.download_timeout as the read deadline,
  // net.retry.*, agent.cache_lock_timeout, agent.download_parallelism) and nodes.cache_size; the program
  // is left unset.
  static materialise_options from(const config::settings& settings);
};

// A pool's node: every command the job sends there runs under the job's lease of it, through the node
// program's lease-run (agent/provide/node_lease.hpp), which ends the command once the lease has expired.
struct node_lease_wrap {
  std::shared_ptr<const node_program> program;
  std::string cache_dir;
  std::string lease_id;
  std::chrono::seconds grace{};  // ssh.kill_grace: between TERM and KILL
};

struct environment {                     // what the node now holds for this plan
  std::string workdir;                   // absolute path on the node
  std::vector<std::string> python_path;  // absolute layer dirs, in plan order
  std::size_t layers_cached = 0, layers_fetched = 0;
  std::uint64_t bytes_fetched = 0;
  std::size_t layers_evicted = 0;
  // A lazy start (agent/node/import_gate.hpp): the command's import hook asks the node program at this
  // socket (FERRY_IMPORT_SOCKET), and python_path is the hook's directory, then every layer's directory in
  // plan order, landed or not (each appears whole, by a rename, when it lands). At the end: the layers the
  // command imported, first imported first, and how many were never fetched because it ended first.
  std::string import_socket;
  // With the plan's site (packaging/site_plan.hpp): the import hook's directory, which alone goes on
  // PYTHONPATH, and the site file (FERRY_SITE) from which the hook makes sys.path the local one.
  std::string hook_dir;
  std::string site_file;
  // Shell words the command's argv is handed to on the node (a pool tenant's `ferry-node as-tenant USER
  // --`, task_command.hpp); empty: the command runs as the login user.
  std::string runner;
  std::vector<std::string> imported;
  std::size_t layers_left = 0;
  std::optional<node_lease_wrap> lease;  // set by the job on a pool's node
};

// Between a lazy start's materialise and the work on that node.
struct lazy_link {
  explicit lazy_link(asio::any_io_executor io) : ready(std::move(io)) {}
  std::optional<environment> early;  // where the command may start, once the node program says so
  net::async_event ready;            // set then, or when materialise ends without it
  double may_start_at = 0;           // seconds into materialise when the node said so
  // An import on the node waits for these layers (ids): the pack may hurry them.
  std::function<void(const std::vector<std::string>& ids)> on_wait;
};

// A node's part in the job's fan-out (agent/materialise/fanout_plan.hpp): the job's token, and the serve id when the
// node keeps copies for its own children. Where its parent serves, once known, the feed says
// (layer_feed::fan_out), with a peer line to the node.
struct fanout_role {
  std::string token;
  std::string serve_id;
};

// Runs the plan on the node behind `link` and reports what it holds. Fails with the node program's
// own error (agent/node/error.hpp: a download's HTTP failure, a digest mismatch, a hostile entry, a full
// disk, a lock's timeout...) with its words in the diagnostics, with net::errc when the link fails,
// and with operation_aborted when cancelled: the node program is then stopped, and what it left half
// made is never taken for a layer.
// The layers come from `feed` as they reach storage: the node starts on each one as it comes. The feed
// knows the node by its id (link.node()).
asio::awaitable<result<environment>> materialise(tracing::action& parent, net::node_link& link,
                                                 layer_feed& feed, const materialise_options& options,
                                                 diagnostics& diag, const fanout_role* fan = nullptr);
// A lazy start: the feed carries the catalogue first; `lazy` learns where the command may start as soon as
// the workspace is in place, and the node program runs on, serving the command's imports, until the feed
// is told the node's work is done (layer_feed::work_done). The environment at the end has its counts and
// what was imported.
asio::awaitable<result<environment>> materialise_lazily(tracing::action& parent, net::node_link& link,
                                                        layer_feed& feed, const materialise_options& options,
                                                        lazy_link& lazy, diagnostics& diag,
                                                        const fanout_role* fan = nullptr);
// A whole plan at once (its cache_dir and cache_cap instead of the options').
asio::awaitable<result<environment>> materialise(tracing::action& parent, net::node_link& link,
                                                 const environment_plan& plan, const materialise_options& options,
                                                 diagnostics& diag);

}  // namespace ferry::agent
