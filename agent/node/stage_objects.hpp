#pragma once
// `ferry-node stage`: the objects of a staging plan (stage_plan.hpp) from their presigned URLs onto the
// node's disk (staging_dir.hpp). Each is streamed into a file of its own, its size and (when its ETag is
// one) MD5 checked as it arrives, and renamed into place whole.
// - Without a window, objects already there with the same ETag and size are kept, and the rest download
//   `limits.parallelism` at a time, before the command starts.
// - With a window, objects arrive in the plan's order, each only once the bytes of the delivered files
//   the command has not deleted yet, plus its own, fit in the window; then `.ferry-stage-complete` says
//   that no more will come.
// Traced under the caller's action: a `ferry:stage:object` {path, bytes} per object fetched, with a
// `ferry:stage:attempt` per try (a cut download, a 5xx, a wrong MD5 are tried again).
#include "agent/node/shard_fetch.hpp"
#include "agent/node/stage_plan.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

namespace ferry::agent::node {

struct stage_outcome {
  std::size_t fetched = 0;
  std::size_t kept = 0;
  std::uint64_t bytes = 0;  // fetched
};

asio::awaitable<result<stage_outcome>> stage_objects(tracing::action& parent, fetch_context& ctx,
                                                     const stage_request& request, diagnostics& diag);

}  // namespace ferry::agent::node
