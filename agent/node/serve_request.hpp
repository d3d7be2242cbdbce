#pragma once
// The request that starts `ferry-node serve` (agent/node/peer_server.hpp): one JSON line on its stdin,
// written by ferry (agent/materialise/peer_serve.cpp) and read by the node program. Apart from the server, so that the
// workstation half builds only the line, not the server.
#include "agent/node/plan.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::agent::node {

struct serve_request {
  std::string task_id;   // the eliot task its actions continue
  node_limits limits;    // read_timeout_ms bounds one request's reads and writes
  std::string cache_dir; // as the plan's header has it
  std::string serve_id;  // the copies' directory under <cache>/serve
  std::string token;     // 64 hex digits
  std::string bind;      // an IPv4 or IPv6 address of this node
  std::int64_t wait_ms = 30'000;  // how long a request waits for a shard still on its way
};

std::string serve_request_line(const serve_request& r);
result<serve_request> parse_serve_request(std::string_view line, diagnostics& diag);

// <cache dir>/serve/<serve_id>, made (with its parent) if missing; the caller checked serve_id is hex.
std::string serve_dir_of(const std::string& cache_dir, const std::string& serve_id);

}  // namespace ferry::agent::node
