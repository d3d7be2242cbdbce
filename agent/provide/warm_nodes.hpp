#pragma once
// The warm minimum (nodes.min_nodes): which nodes of a provider are pinned, so that they never stop
// themselves when idle (agent/provide/node_watchdog.hpp). Sans-io: the registry in, the pinned ids out.
#include "provision/node.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent {

// details.pinned: part of the warm minimum, so the node gets no idle watchdog.
bool is_pinned(const provision::node& n);
void pin(provision::node& n);

// Among `nodes` (the registry, in its order: oldest first) those of `provider` that are running: every
// one pinned already (details.pinned) stays pinned, and the earliest others are pinned until
// `min_nodes` are. Returns the ids of all pinned ones, in registry order. Nodes that are not running
// (stopped, terminated, still pending) neither count nor get pinned.
std::vector<std::string> warm_nodes(const std::vector<provision::node>& nodes, std::string_view provider,
                                    int min_nodes);

}  // namespace ferry::agent
