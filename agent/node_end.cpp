#include "agent/node_end.hpp"

#include <fmt/format.h>

namespace ferry::agent {

namespace asio = boost::asio;

asio::awaitable<result<void>> end_node(tracing::action& parent, provision::provider& provider,
                                       provision::node_registry& registry, provision::node n, diagnostics& diag) {
  auto ended = co_await provider.terminate(parent, n, diag);
  if (ended) co_return co_await registry.remove(parent, n.id, diag);
  n.state = provision::node_state::orphaned;
  diagnostics d;
  auto kept = co_await registry.add(parent, n, d);
  diag.set(fmt::format("{} (node {} {}; `ferry nodes down {}` tries again)", diag.message, n.id,
                       kept ? "is kept in the registry as orphaned" : "could not even be marked orphaned: " + d.message,
                       n.id));
  parent.log("ferry:provision:orphaned", {{"node", n.id}, {"reason", diag.message}});
  co_return ended.error();
}

}  // namespace ferry::agent
