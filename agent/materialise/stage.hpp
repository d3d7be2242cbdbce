#pragma once
// Data staging (`ferry run --stage s3://BUCKET/PREFIX=NODE_DIR`): the objects under a prefix copied to a
// node's local disk by presigned URL, before the command starts, or, with a window, alongside it: at most
// `window` bytes of files the command has not yet read (and deleted) are on the node at any time, and
// the next ones arrive as it deletes them, in listing order, until a marker says the stream has ended.
// The node program does it (`ferry-node stage`, agent/node/stage_objects.hpp): the plan goes on its stdin,
// so no URL reaches an argv or a file on the node, and every file is checked and renamed into place whole.
#include "agent/node/stage_plan.hpp"
#include "agent/provide/node_program.hpp"
#include "config/settings.hpp"
#include "net/s3_client.hpp"
#include "net/node_link.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent {

namespace asio = boost::asio;

// "s3://BUCKET/PREFIX=NODE_DIR"; NODE_DIR must be absolute.
struct stage_spec {
  std::string bucket;
  std::string prefix;  // may be empty: the whole bucket
  std::string node_dir;
};
result<stage_spec> parse_stage_spec(std::string_view text, diagnostics& diag);

using node::stage_object;

struct stage_plan {
  std::string source;  // "s3://BUCKET/PREFIX", for messages
  std::string node_dir;
  std::vector<stage_object> objects;  // in listing order
  std::uint64_t bytes = 0;
  std::uint64_t window = 0;  // 0: everything, before the command
};

struct stage_options {
  node::node_limits limits;  // parallelism: objects downloading at once (agent.stage_parallelism)
  std::shared_ptr<const node_program> program;  // must be set: load_node_program()
  std::string cache_dir;  // where the program is kept on the node; empty: the default
  std::string node_path;  // PATH for the program's command line; empty: the login's
  // On a team pool's node: the tenant's Unix user, as whom the node program stages (NODE_DIR must then be
  // a place that user may write, such as under its home or /tmp). Empty: the login user.
  std::string tenant;

  // The limits from config (net.connect_timeout, agent.download_timeout as the read deadline, net.retry.*,
  // agent.stage_parallelism); the program is left unset.
  static stage_options from(const config::settings& s);
};

// Lists the prefix and presigns every object for the nodes. Fails on a prefix with no objects, and on a
// window smaller than the largest object (it could never be delivered).
asio::awaitable<result<stage_plan>> plan_stage(tracing::action& parent, net::s3_client& s3, const stage_spec& spec,
                                               std::uint64_t window, diagnostics& diag);

// Puts the objects named in `order_text` (one per line: a key, or a path under the prefix) first, in that
// order; the rest follow in listing order. `file` names the text in errors: a line naming no object, or
// one named twice, fails as "FILE:LINE: ...".
result<void> order_stage(stage_plan& plan, std::string_view prefix, std::string_view order_text,
                         std::string_view file, diagnostics& diag);

struct stage_result {
  std::size_t fetched = 0;
  std::size_t kept = 0;  // already there, unchanged
  std::uint64_t bytes = 0;
};

// Runs the plan on the node over one exec of the node program. Traced as `ferry:stage` (node, source,
// objects, bytes; at the end fetched, kept, bytes and MB/s), and on the node as `ferry:node:stage` with an
// action per object fetched (in the node's own trace file). Cancelling it stops the node's downloads and
// leaves no partial file.
asio::awaitable<result<stage_result>> stage(tracing::action& parent, net::node_link& link,
                                            const stage_plan& plan, const stage_options& options, diagnostics& diag);

}  // namespace ferry::agent
