#include "agent/provide/node_access.hpp"

#include "net/ssh_keys.hpp"
#include "net/ssh_node_link.hpp"
#include "provision/error.hpp"
#include "provision/make_provider.hpp"

#include <fmt/format.h>

namespace ferry::agent {

result<node_access> open_node_access(const command_context& ctx, diagnostics& diag) {
  const auto& s = ctx.config.values;
  auto ssh = net::ssh_client_options::from(s);
  auto key = net::ensure_own_key(ssh.config_dir, diag);
  if (!key) return key.error();
  return node_access{std::move(*key), std::move(ssh),
                     provision::node_registry(provision::registry_file(s.dirs.state), s.nodes.registry_lock_timeout),
                     provision::readiness_options_from(s)};
}

result<std::unique_ptr<provision::provider>> provider_named(const command_context& ctx, const node_access& access,
                                                            std::string_view name, diagnostics& diag) {
  auto s = ctx.config.values;
  if (!name.empty()) s.nodes.provider = std::string(name);
  return provision::make_provider(ctx.io, s, access.public_key, diag);
}

net::ssh_peer peer_of(const provision::node& n) { return {n.id, n.host, n.port, n.user}; }

boost::asio::awaitable<result<std::shared_ptr<net::node_link>>> connect_node_with(tracing::action& parent,
                                                                                  const provision::node& n,
                                                                                  const net::ssh_client_options& options,
                                                                                  diagnostics& diag) {
  auto session = co_await net::ssh_connect(parent, peer_of(n), options, diag);
  if (!session) co_return session.error();
  co_return net::link_over(std::move(*session));
}

boost::asio::awaitable<result<std::shared_ptr<net::node_link>>> connect_node(tracing::action& parent,
                                                                             const provision::node& n,
                                                                             const node_access& access,
                                                                             diagnostics& diag) {
  co_return co_await connect_node_with(parent, n, access.ssh, diag);
}

provision::login_check ssh_login_check(const net::ssh_client_options& options,
                                      std::shared_ptr<net::node_link>* keep) {
  return [&options, keep](tracing::action& parent, const provision::node& n,
                          diagnostics& diag) -> boost::asio::awaitable<result<void>> {
    auto link = co_await connect_node_with(parent, n, options, diag);
    if (!link) co_return link.error();
    auto ran = co_await net::run_command(parent, **link, "true", diag);
    if (keep && ran && ran->exit.success()) {
      *keep = std::move(*link);
    } else {
      (*link)->close();
    }
    if (!ran) co_return ran.error();
    if (!ran->exit.success()) {
      diag.set(fmt::format("node {}: `true` ended with {}", n.id, ran->exit.describe()));
      co_return error_code(provision::errc::ssh_not_ready_in_time);
    }
    co_return result<void>{};
  };
}

}  // namespace ferry::agent
