#pragma once
// What an agent needs to use a team's pool (pool.name, docs/pool.md): the pool's records in storage, the
// tenant and holder it leases as, the settings of its leases, and how it logs in to the pool's nodes.
//
// Every node made for a pool authorises one key, the pool's own, kept in storage beside the records
// (PREFIX/pools/NAME/ssh-key) and made by the first agent that finds none (If-None-Match: *, so two agents
// that race keep one key). Each agent keeps a copy in its config dir and logs in with it: a node made by
// one tenant is then usable by every other, which a key per tenant would not allow without a coordinator
// to hand keys out. Whoever can read the pool's prefix can log in to its nodes; docs/pool.md says what
// that means. Each node's host key is pinned from its record, in a known_hosts of the pool's own.
#include "agent/cli/command_context.hpp"
#include "agent/pool/pool_lease.hpp"
#include "agent/pool/pool_store.hpp"
#include "net/s3_client.hpp"
#include "net/ssh_connect.hpp"

#include <boost/asio/awaitable.hpp>

#include <filesystem>
#include <string>

namespace ferry::agent {

struct pool_access {
  pool::pool_store store;
  std::string name;
  std::string tenant;            // pool.tenant or $USER@host, as a Unix name
  std::string holder;            // this agent: host, pid and a random part
  std::string public_key;        // the pool's key, for the authorized_keys of nodes made for the pool
  net::ssh_client_options ssh;   // logs in with the pool's key, pins host keys in the pool's known_hosts
  pool::acquire_settings acquire;
  pool::pool_time ttl = 0;       // seconds a lease lasts unless renewed
  pool::pool_time renew_every = 0;  // a third of it
};

// The pool the configuration names, its key fetched (or made and stored) and copied into
// <config>/pools/<hash of the pool's location>/. errc::bad_pool_name for a name that cannot be one; a
// tenant name with nothing left of it is bad_value.
boost::asio::awaitable<result<pool_access>> open_pool_access(tracing::action& parent, const command_context& ctx,
                                                             net::s3_client& s3, const net::ssh_client_options& ssh,
                                                             diagnostics& diag);

// A node's host key as the record holds it ("TYPE BASE64") pinned for `label` in the pool's known_hosts: the
// first record seen for it is trusted, and a record that later names another key for the same node is
// refused (net::errc::host_key_changed) until the node leaves the pool.
result<void> pin_host_key(const pool_access& access, const std::string& label, const std::string& host_key,
                          diagnostics& diag);

}  // namespace ferry::agent
