#include "agent/provide/node_end.hpp"

#include "agent/provide/node_access.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

namespace ferry::agent {

namespace asio = boost::asio;

asio::awaitable<result<void>> end_node(tracing::action& parent, provision::provider& provider,
                                       provision::node_registry& registry, provision::node n, diagnostics& diag) {
  // One type whatever the provider: `ferry trace stats` ends a node's provisioned time with it
  // (tracing/trace_conventions.hpp).
  auto act = parent.child(action_types::provision::terminate, {{"node", n.id}, {"provider", provider.name()}});
  auto ended = co_await provider.terminate(act, n, diag);
  act.finish(ended, diag);
  if (ended) co_return co_await registry.remove(parent, n.id, diag);
  n.state = provision::node_state::orphaned;
  diagnostics d;
  auto kept = co_await registry.add(parent, n, d);
  diag.set(fmt::format("{} (node {} {}; `ferry nodes down {}` tries again)", diag.message, n.id,
                       kept ? "is kept in the registry as orphaned" : "could not even be marked orphaned: " + d.message,
                       n.id));
  parent.log(action_types::provision::orphaned, {{"node", n.id}, {"reason", diag.message}});
  co_return ended.error();
}

asio::awaitable<result<void>> end_node_by_its_provider(tracing::action& parent, const command_context& ctx,
                                                       node_access& access, const provision::node& n,
                                                       diagnostics& diag) {
  auto provider = provider_named(ctx, access, n.provider, diag);
  if (!provider) co_return provider.error();
  co_return co_await end_node(parent, **provider, access.registry, n, diag);
}

}  // namespace ferry::agent
