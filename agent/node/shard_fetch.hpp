#pragma once
// One shard of a layer, from storage into the layer's directory in one pass: its bytes are hashed as they
// arrive and its entries inflated and written on the CPU pool while the next bytes download; no zip file
// ever touches the disk. A small shard comes in one GET. A larger one comes as its end first (the central
// directory: every entry's name and size, checked against the manifest before any content), then its body
// in ranged GETs of node_limits::range_size, in order.
//
// Two checks, both known only once the last byte is in: the zip's SHA-256 (from the manifest, which storage
// holds: a quick check of the transfer), and the shard's id recomputed over the entries inflated
// (id_check.hpp), which must be the one the workstation computed from its own files. The caller renames the
// layer into place only when every shard passed both, so the files of a shard that fails either are
// written, then thrown away.
#include "agent/node/layer_writer.hpp"
#include "agent/node/plan.hpp"
#include "net/http_client.hpp"
#include "net/offload.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

namespace ferry::agent::node {

namespace asio = boost::asio;

struct fetch_context {
  net::http_client& http;
  net::cpu_pool& pool;
  const node_limits& limits;
  std::string serve_dir;  // where a checked copy of each shard is kept for peers (shard_tee.hpp); empty: none
};

struct shard_outcome {
  std::uint64_t downloaded = 0;  // bytes over the network
  std::uint64_t entries = 0;
};

// From a peer of the job (fan-out) when `token` is set: it goes as the x-ferry-token header.
// Fails with net::errc for transport and HTTP
// failures (server_error, throttled and timeouts are worth another attempt), errc::digest_mismatch,
// errc::not_packed (the entries are not the workstation's: never worth another attempt), errc::bad_zip,
// errc::over_manifest, or what the writer failed with.
// `label` names the shard in messages: "layer numpy (3f2a9c01b2d4, shard 2 of 3)".
// A download cut short resumes with a Range request from where its bytes end (a resume action of `act`).
asio::awaitable<result<shard_outcome>> fetch_shard(tracing::action& act, fetch_context& ctx, const shard_source& shard,
                                                   std::string_view label, layer_writer& writer, diagnostics& diag,
                                                   std::string_view token = {});

// Who answered a download: storage, or a peer of the job (a node's `ferry-node serve`, fan-out), whose
// 404 means only that it holds no copy. The messages name it, so that a peer's refusal never reads as
// storage's.
enum class answerer { storage, peer };

// An HTTP status as net's codes, so a retry predicate knows 5xx and 429 (worth another try) from 403 and
// 404 (not); the diagnostics say "downloading WHAT: storage answered HTTP N" (or "the peer answered").
error_code status_error(unsigned status, std::string_view what, answerer who, diagnostics& diag);
inline error_code storage_status_error(unsigned status, std::string_view what, diagnostics& diag) {
  return status_error(status, what, answerer::storage, diag);
}

// A presigned URL split into where it goes and what to ask: http(s)://HOST[:PORT]/PATH?QUERY.
struct url_parts {
  net::origin to;
  std::string host_header;  // HOST[:PORT] exactly as the URL has it: the signature covers it
  std::string target;       // /PATH?QUERY
};
result<url_parts> split_url(std::string_view url, diagnostics& diag);

}  // namespace ferry::agent::node
