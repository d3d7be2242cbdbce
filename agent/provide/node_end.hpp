#pragma once
// Ending a node ferry made. The registry forgets a node only once its provider confirmed the end; when
// the provider fails (an API error, storage of its state gone), the node may still run and cost, so it
// stays in the registry marked orphaned, where `ferry nodes ls` shows it and `ferry nodes down` retries.
#include "provision/node_registry.hpp"
#include "provision/provider.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

namespace ferry::agent {

struct command_context;
struct node_access;

// Terminates `n` and removes it from `registry`; on a failed terminate, records it as orphaned and
// returns the provider's error (diag says what the provider said and that the node was kept).
boost::asio::awaitable<result<void>> end_node(tracing::action& parent, provision::provider& provider,
                                              provision::node_registry& registry, provision::node n,
                                              diagnostics& diag);

// The same through the provider that made `n` (its `provider`, configured from ctx's settings); a provider
// that cannot be configured is that error, and the node stays as it is.
boost::asio::awaitable<result<void>> end_node_by_its_provider(tracing::action& parent, const command_context& ctx,
                                                              node_access& access, const provision::node& n,
                                                              diagnostics& diag);

}  // namespace ferry::agent
