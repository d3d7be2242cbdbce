#pragma once
// What every command that touches nodes needs: ferry's own SSH key, the provider the configuration
// names (or the one that made a given node), the node registry, an SSH login check for readiness, and
// the link to a node (net/node_link.hpp). This is where ferry's nodes are reached over SSH: the rest of
// agent/ knows them only as links.
#include "agent/cli/command_context.hpp"
#include "net/node_link.hpp"
#include "net/ssh_connect.hpp"
#include "provision/node_registry.hpp"
#include "provision/provider.hpp"
#include "provision/readiness.hpp"

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <string>

namespace ferry::agent {

struct node_access {
  std::string public_key;  // ferry's own key, authorised on the nodes ferry makes
  net::ssh_client_options ssh;
  provision::node_registry registry;
  provision::readiness_options readiness;
};

// Makes ferry's key on first use. Fails when the config dir cannot hold it.
result<node_access> open_node_access(const command_context& ctx, diagnostics& diag);

// The provider named `name` ("" = nodes.provider), configured from ctx's settings.
result<std::unique_ptr<provision::provider>> provider_named(const command_context& ctx, const node_access& access,
                                                            std::string_view name, diagnostics& diag);

// How ferry's SSH client reaches a node.
net::ssh_peer peer_of(const provision::node& n);

// Logs in to `n` with ferry's SSH client (net::ssh_connect: traced, and failing, as that says).
boost::asio::awaitable<result<std::shared_ptr<net::node_link>>> connect_node(tracing::action& parent,
                                                                             const provision::node& n,
                                                                             const node_access& access,
                                                                             diagnostics& diag);

// The same with other client options (a pool's nodes: the pool's key and known_hosts, pool_access.hpp).
boost::asio::awaitable<result<std::shared_ptr<net::node_link>>> connect_node_with(tracing::action& parent,
                                                                                  const provision::node& n,
                                                                                  const net::ssh_client_options& options,
                                                                                  diagnostics& diag);

// Readiness's last stage through ferry's own SSH client: log in and run `true`. With `keep`, the link
// of the login that succeeded is handed over there instead of closed (it lives as long as the check).
provision::login_check ssh_login_check(const net::ssh_client_options& options,
                                      std::shared_ptr<net::node_link>* keep = nullptr);

}  // namespace ferry::agent
