#pragma once
// `ferry-node serve`: hands this job's shards to the other nodes of the job (fan-out). The shards are the
// checked copies materialise keeps in <cache>/serve/<serve_id> (shard_tee.hpp); a request for one that
// is still on its way waits for it, up to `wait_ms`; one that failed here, or that this node will not copy
// (its layer was cached, or its materialise is over without it: shard_tee.hpp), is refused at once (404),
// so the peer turns to storage. Only `GET /shards/<sha256>` with the job's token in `x-ferry-token` is
// answered; a Range of bytes is honoured, as storage does. The peer checks every byte against the
// manifest's SHA-256 itself: this server is trusted with nothing.
//
// `GET /blobs/<sha256>` (same token, same Range) hands on an argument of the Python API that this node's
// workers fetched and checked into <cache>/blobs (docs/python-api.md): one not there yet is waited for,
// up to `wait_ms`, since ferry sends a child here only for a blob it asked this node to fetch; one whose
// fetch failed here (<sha256>.failed beside it) is refused at once.
//
// It listens on `bind`, the node's address as the other nodes reach it, on a port the kernel picks, and
// says which in a `ferry:serve:listening {port}` message. It serves until its input ends (ferry closes
// it once the node's children have their layers, or ferry stops), then removes the copies.
#include "agent/node/serve_request.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ferry::agent::node {

struct serve_outcome {
  std::uint64_t requests = 0, served = 0, refused = 0;
  std::uint64_t bytes = 0;
};

// Serves until `input_ended` completes (stdin's end), then closes every connection.
using input_watch = std::function<boost::asio::awaitable<void>()>;
boost::asio::awaitable<result<serve_outcome>> serve_shards(tracing::action& act, const serve_request& request,
                                                           input_watch input_ended, diagnostics& diag);

}  // namespace ferry::agent::node
