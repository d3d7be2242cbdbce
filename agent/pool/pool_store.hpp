#pragma once
// A team pool's records in storage: PREFIX/pools/NAME/nodes/<node-id>.json, one object per node, read
// with their ETags and written only with a condition (If-Match the ETag read, If-None-Match: * for a new
// node; net/s3_client's write_condition). What to write is lease_core's decision; this carries it out.
// There is no coordinator and no lock: a write whose condition fails (net::errc::precondition_failed)
// means another agent wrote first, and the caller reads again.
//
// Trace: `ferry:pool:read` {prefix} -> nodes, unreadable (each unreadable one a `ferry:pool:unreadable`
// message naming it and why), `ferry:pool:write` {node, condition} -> etag, or failed with
// precondition_failed on a conflict.
#include "agent/pool/lease_core.hpp"
#include "agent/pool/pool_snapshot.hpp"
#include "net/s3_client.hpp"

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace ferry::agent::pool {

// Where a pool lives: `prefix` is PREFIX/pools/NAME/ (ending with a slash).
struct pool_location {
  std::string bucket;
  std::string prefix;

  std::string key_of(std::string_view node_id) const;
  // PREFIX/pools/NAME/ssh-key: the pool's SSH key, which every node made for the pool authorises.
  std::string ssh_key() const;
};

// PREFIX/pools/NAME/ under a storage prefix (empty, or ending with a slash or not).
pool_location pool_at(std::string bucket, std::string_view storage_prefix, std::string_view pool_name);

// A pool's name: letters, digits, '.', '_' and '-', not "." or "..", at most 64 characters; it names a
// prefix in storage, which a '/' or ".." would leave. errc::bad_pool_name naming it otherwise.
result<void> check_pool_name(std::string_view name, diagnostics& diag);

class pool_store {
 public:
  // Reads as many records at once as s3.max_concurrency allows.
  pool_store(net::s3_client& s3, pool_location where);

  // Every record under nodes/, with its ETag. A record that does not parse is in snapshot.unreadable,
  // and named in the trace; a failed request fails the read.
  boost::asio::awaitable<result<pool_snapshot>> read(tracing::action& parent, diagnostics& diag);

  // One node's record with its ETag; none when there is no such object. A record that does not parse is
  // errc::bad_pool_record.
  boost::asio::awaitable<result<std::optional<pool_entry>>> read_one(tracing::action& parent,
                                                                     const std::string& node_id, diagnostics& diag);

  // The record PUT with its condition: the new ETag, or net::errc::precondition_failed when another
  // agent wrote first (or, after a retried request whose first answer was lost, when our own write did:
  // either way, read again).
  boost::asio::awaitable<result<std::string>> write(tracing::action& parent, const record_write& w,
                                                    diagnostics& diag);

  // The node's record deleted only if it is still as read (If-Match its ETag): net::errc::precondition_failed
  // or no_such_key when another agent wrote or removed it since. For a node that is gone.
  boost::asio::awaitable<result<void>> remove(tracing::action& parent, const pool_entry& entry, diagnostics& diag);

  // The pool's SSH key (pool_location::ssh_key), none when the pool has none yet. Its text reaches no trace.
  boost::asio::awaitable<result<std::optional<std::string>>> read_key(tracing::action& parent, diagnostics& diag);
  // The pool's SSH key stored, only if the pool has none (If-None-Match: *): net::errc::precondition_failed
  // when another agent stored one first, which the caller reads and uses.
  boost::asio::awaitable<result<void>> create_key(tracing::action& parent, std::string_view text, diagnostics& diag);

  const pool_location& where() const { return where_; }

 private:
  net::s3_client& s3_;
  pool_location where_;
};

}  // namespace ferry::agent::pool
