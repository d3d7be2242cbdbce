#pragma once
// What ferry asks of the node program, as the JSON lines it sends on stdin: the layers of a run, each
// with its shards behind presigned URLs (credentials never reach a node), each shard's id as this
// workstation computed it from its own files (the trust anchor: the node recomputes it over what it
// inflates), and the SHA-256, size, file count and content bytes of each shard's zip; where the node's cache lives and how large it may
// grow; the limits and deadlines of the work; and the eliot task the node's own actions continue.
// Both halves of the agent read this header: ferry writes the document, the node program parses it.
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <optional>
#include <variant>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent::node {

struct shard_source {
  // presigned GET, as the node reaches storage; empty while the shard is on its way to storage (a layer
  // line sent at its first stored shard: the shard's own line brings it, with sha256 and bytes)
  std::string url;
  // hex SHA-256 of the zip's bytes: as storage or a manifest read back from it says, so only a quick
  // check of the transfer, never proof of what the zip holds (that is `id`)
  std::string sha256;
  std::uint64_t bytes = 0;      // the zip's size
  std::uint64_t files = 0;      // entries it holds, from the workstation's scan (0: not said)
  std::uint64_t content = 0;    // bytes its files hold, from the scan (0 with files 0: not said)
  // hex shard id (packaging/entries_id.hpp) as the workstation computed it from its own files: the node
  // puts a shard in place only when what it inflated has this id
  std::string id;
  std::string key;              // the object's key in storage, for messages (not a credential)
  // A piece shard (packaging/layer.hpp): its one entry, which must be named piece_path, is bytes
  // [piece_offset, piece_offset + content) of a file of file_size bytes, written at that offset; the file's
  // other pieces come in other shards of the layer. file_size 0: an ordinary shard. On the line:
  // "piece": {"path": P, "offset": N, "file_size": M}. The path comes from the workstation, never from the
  // zip: a piece can only ever write into the file it was packed for.
  std::string piece_path;
  std::uint64_t piece_offset = 0;
  std::uint64_t file_size = 0;

  bool is_piece() const { return file_size != 0; }

  // In storage, its URL and digest known: it can be fetched. Otherwise a shard line is still to come.
  bool stored() const { return !url.empty(); }
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
  // After TERM (or INT, HUP), how long the work has to wind down and end its actions before the program
  // ends them itself and exits: shorter than the time ferry leaves before KILL (agent/materialise/node_call.hpp).
  std::int64_t shutdown_grace_ms = 2'500;
};

// The plan as ferry sends it on stdin, JSON lines: a header, then one line per layer as soon as the first
// of its shards is in storage (in any order, each with its place in the plan), then an end line with the
// count and the workspace. A node starts on each layer as its line arrives, so it need not wait for the
// whole pack.
//
// A layer of several shards streams: its line names every shard (id, key, files, content), but only those
// already in storage carry a URL, a sha256 and bytes; each of the others follows in a shard line the
// moment it is stored (plan_shard), before the end line. The node fetches each shard as its line arrives,
// and puts the layer in place only once every shard has arrived and passed its checks. A plan known whole
// at once (a manifest found in storage, a warm run) has no shard lines: every layer line is complete.
struct plan_header {
  std::string cache_dir;    // on the node; empty: ${XDG_CACHE_HOME:-$HOME/.cache}/ferry
  std::uint64_t cache_cap = 0;  // least recently used layers beyond it are evicted; 0: no cap
  std::string task_id;      // eliot's serialised task id the node's actions continue
  node_limits limits;
  // Lazy start (import_gate.hpp): the command may start once the workspace is in place, while the rest
  // arrives; the program then serves the command's import hook and runs until a work_done line.
  bool lazy = false;
  // Fan-out (agent/materialise/fanout_plan.hpp). serve_id: this node keeps a checked copy of each shard it downloads
  // in <cache>/serve/<serve_id>, for its `ferry-node serve` to hand on (shard_tee.hpp); empty: none is
  // kept. peer_token: the job's secret, which a peer line's server asks for.
  std::string serve_id;
  std::string peer_token;
  // A pool tenant's Unix user (tenant_user.hpp), made on first use: the environment layers go to the node's
  // shared cache (tenant_account.hpp), its workspace and everything else of this plan to its own directory,
  // and a lazy start's socket is its alone. Empty: no tenant, the node's own cache as before.
  std::string tenant;
};

// Another node of the job serves this job's shards: from now on, a layer's first attempt fetches them
// there (`URL/shards/<sha256>`, with the header's peer_token); later attempts, from storage.
struct plan_peer {
  std::string url;  // http://HOST:PORT
};

// What a lazy plan says of every layer before any is in storage (the pack knows them once it has scanned):
// the names a Python program imports from each, so the import hook knows which imports must wait.
struct catalogue_entry {
  std::size_t index = 0;             // its place in sys.path order
  std::string id;                    // hex layer id
  std::string name;                  // "workspace", "numpy", ...
  std::size_t rank = 0;              // fetch order: 0 first (the workspace, then what runs imported first)
  std::vector<std::string> modules;  // top-level import names it holds
  std::vector<std::string> dists;    // normalised distribution names (importlib.metadata) it holds
};

struct plan_catalogue {
  std::vector<catalogue_entry> layers;   // by index, every layer of the plan
  std::optional<std::size_t> workspace;  // the workspace layer's index
};

// How the command's Python sees the local environment (packaging/site_plan.hpp), with layers by id: sent
// once, before the catalogue and every layer. The node program writes it, each id made its layer's
// directory, where the import hook reads it (site_file.hpp).
struct site_path_entry {
  enum class kind { layers, stdlib, node_site, raw };
  kind what = kind::raw;
  std::vector<std::string> ids;  // kind::layers
  std::string raw;               // the workstation's entry: kept by kind::raw, a name for the others
};

struct site_import {
  std::string id;    // the layer that holds the .pth file
  std::string file;  // its name
  std::string line;  // "import ..."
};

struct site_dir {
  std::string local;  // a directory on the workstation
  std::string id;     // the layer it became
};

struct plan_site {
  std::vector<site_path_entry> path;
  std::vector<site_import> imports;
  std::vector<site_dir> dirs;
  bool hide_node_site = false;
};

// The command is over: a lazy plan stops here, whatever is still on its way.
struct plan_work_done {};

struct plan_end {
  std::size_t layers = 0;                // how many layer lines came (indexes 0..layers-1)
  std::optional<std::size_t> workspace;  // the workspace layer's index: the command's working directory
};

struct placed_layer {
  std::size_t index = 0;  // its place in sys.path (PYTHONPATH) order
  layer_source layer;
};

// A shard of a layer whose line came already is now in storage: {"shard": {"layer": ID, "index": N,
// "url": ..., "sha256": ..., "bytes": ...}}, `index` its place in the layer line's shards (from 0). A shard
// line before its layer's line, or for a shard the layer does not have, is refused; one for a shard already
// known is a repeat (a layer at two places in the plan) and changes nothing.
struct plan_shard {
  std::string layer;   // hex layer id
  std::size_t index = 0;
  std::string url;     // presigned GET
  std::string sha256;  // of the zip, hex
  std::uint64_t bytes = 0;
};

using plan_line = std::variant<plan_header, placed_layer, plan_end, plan_catalogue, plan_work_done, plan_peer,
                               plan_site, plan_shard>;

std::string header_line(const plan_header& header);
std::string catalogue_line(const plan_catalogue& catalogue);
std::string site_line(const plan_site& site);
std::string work_done_line();
std::string peer_line(const plan_peer& peer);
std::string layer_line(std::size_t index, const layer_source& layer);
std::string shard_line(const plan_shard& shard);
// What the layer's shards unpack to, in bytes.
std::uint64_t content_bytes(const layer_source& layer);
std::string end_line(const plan_end& end);
// One line (without its newline); errc::bad_plan naming what is wrong.
result<plan_line> parse_plan_line(std::string_view line, diagnostics& diag);

// Checks what the node relies on: hex ids and digests, URLs without line breaks, a shard not yet stored
// with neither URL nor digest; errc::bad_plan naming the layer otherwise.
result<void> check_layer(const layer_source& layer, diagnostics& diag);

// A whole plan known at once: the same lines, all together.
struct environment_plan {
  std::vector<layer_source> layers;      // in sys.path (PYTHONPATH) order
  std::optional<std::size_t> workspace;  // index of the workspace layer
  std::string cache_dir;
  std::uint64_t cache_cap = 0;
  std::string task_id;
  node_limits limits;
};

// check_layer for each, and a workspace index inside the plan.
result<void> check_plan(const environment_plan& plan, diagnostics& diag);
std::string plan_lines(const environment_plan& plan);

}  // namespace ferry::agent::node
