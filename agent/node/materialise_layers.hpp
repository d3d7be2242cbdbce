#pragma once
// The node program's materialise: makes a plan's layers present in the node's layer cache as their lines
// arrive (plan.hpp): `limits.parallelism` layers at a time, each under its own lock; their shards download
// `limits.parallelism` at a time across the whole plan, each streamed, hashed and extracted straight into the layer's temporary directory
// (shard_fetch.hpp); a layer whose shards all succeeded is renamed into place, then marked. A failed
// attempt at a layer (a download still cut after its resumes, a 5xx) is tried again through the retry
// helper, into the same directory: a shard that passed its checks stays, and only the others are fetched
// again, each failed one's files removed first. Once a layer has failed for good (its directory goes
// then), no new shard starts (in a lazy start only that layer fails:
// the command may never import it, and needs the workspace whatever else failed). Least recently used layers beyond the
// plan's cap are evicted at the end. What is known of the plan as it goes is plan_progress.hpp (sans-io).
#include "agent/node/plan.hpp"
#include "agent/node/plan_progress.hpp"
#include "agent/node/shard_fetch.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <optional>

#include <string>
#include <vector>

namespace ferry::agent::node {

// The plan's next line (after its header), waiting for it; none at the end of the input.
using line_source = std::function<asio::awaitable<result<std::optional<std::string>>>(diagnostics&)>;

// Reads the plan from `next` and makes its layers present; `stop_reading` ends a wait of `next` (a layer
// failed: the rest of the plan is not wanted).
asio::awaitable<result<materialised>> materialise_layers(tracing::action& act, fetch_context& ctx,
                                                          const plan_header& header, line_source next,
                                                          std::function<void()> stop_reading, diagnostics& diag);

}  // namespace ferry::agent::node
