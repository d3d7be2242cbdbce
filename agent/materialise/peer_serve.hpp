#pragma once
// The workstation's half of a node's `ferry-node serve` (agent/node/peer_server.hpp): one exec that
// runs while the node hands this job's shards on to its children (agent/materialise/fanout_plan.hpp). Its stdin is
// the request, then an empty line every 50 ms (exec reads the program's output only between reads of
// its input, and the port must not wait), and its end once `done()` says so; the program then stops
// and removes its copies.
//
// Trace: `ferry:serve {node}` holds the node program's `ferry:node:serve` (in the node's own trace file,
// as for materialise), whose end says how many requests it served, refused, and the bytes.
#include "agent/materialise/materialise.hpp"
#include "agent/node/peer_server.hpp"
#include "net/node_link.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <functional>

namespace ferry::agent {

struct serve_settings {
  std::string serve_id;  // the copies' directory on the node, as the plan's header names it
  std::string token;     // the job's secret
  std::string bind;      // the node's address as the other nodes reach it
  std::int64_t wait_ms = 30'000;
};

// Runs the server until done(); `on_port` once it listens. Fails when the program could not start or
// listen: the node's children then fetch from storage.
asio::awaitable<result<void>> serve_peers(tracing::action& parent, net::node_link& link,
                                          const materialise_options& options, const serve_settings& settings,
                                          std::function<void(unsigned port)> on_port, std::function<bool()> done,
                                          diagnostics& diag);

}  // namespace ferry::agent
