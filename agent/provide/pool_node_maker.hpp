#pragma once
// How a job grows a team's pool (pool_lease.hpp's pool_nodes): the provider makes one node that authorises
// the pool's key, readiness waits until it takes a login with that key (which pins its host key in the
// pool's known_hosts, where the record's host_key is read from), and the node gets its idle watchdog:
// pool.idle_timeout, except for the first pool.min_nodes names (node-000, ...), which stay. The node is
// not in the agent's own registry: it is the pool's, and anyone who leases it may use it.
//
// The login readiness made is kept for the lease the node was made for (take_link), so the job's first
// use of its new node costs no second handshake.
#include "agent/cli/command_context.hpp"
#include "agent/pool/pool_lease.hpp"
#include "agent/provide/pool_access.hpp"
#include "net/node_link.hpp"
#include "provision/node.hpp"
#include "provision/provider.hpp"
#include "provision/readiness.hpp"

#include <boost/asio/awaitable.hpp>

#include <map>
#include <memory>
#include <string>

namespace ferry::agent {

// The node a pool record names, as ferry's SSH client reaches it. Its id is the provider's (the label its
// host key is pinned under), its name the pool's (node-000). Marked as watched, so that every command sent
// to it marks the node busy for the watchdog it may have (node_watchdog.hpp).
provision::node node_of_record(const pool::pool_record& r, const config::settings& s);

// The settings a pool's nodes are made and watched with: nodes.min_nodes, max_nodes and idle_timeout
// replaced by pool.*, and the provider's own state (the local provider's node dirs) under <state>/pool/,
// apart from the user's private nodes: `ferry nodes` neither lists nor ends a pool's nodes.
config::settings pool_node_settings(const config::settings& s);

// node-000 -> 0; -1 for a name the pool does not give.
int pool_node_index(std::string_view node_id);

class pool_node_maker {
 public:
  // `provider` authorises pool.public_key on the nodes it makes.
  pool_node_maker(const command_context& ctx, const pool_access& pool, provision::provider& provider,
                  provision::readiness_options readiness);

  pool::pool_nodes callbacks();
  // The link readiness opened to the node of that provider id, once (null when there is none).
  std::shared_ptr<net::node_link> take_link(const std::string& provider_id);

 private:
  boost::asio::awaitable<result<pool::new_node>> make(tracing::action& act, std::string node_id, diagnostics& diag);
  boost::asio::awaitable<result<void>> end(tracing::action& act, pool::new_node made, diagnostics& diag);

  const command_context& ctx_;
  const pool_access& pool_;
  provision::provider& provider_;
  provision::readiness_options readiness_;
  std::map<std::string, provision::node> made_;                   // provider id -> as the provider made it
  std::map<std::string, std::shared_ptr<net::node_link>> links_;  // provider id -> readiness's login
};

}  // namespace ferry::agent
