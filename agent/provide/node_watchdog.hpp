#pragma once
// Nodes that stop themselves when idle (nodes.idle_timeout), enforced on the node itself: a node that
// ferry forgets about, or that outlives the workstation that made it, still ends. The watchdog is the node
// program's (`ferry-node watchdog`, agent/node/idle_watchdog.hpp: a detached process that reads the busy
// markers and `last-used` in the node's state dir and runs the provider's self-stop command,
// provision::provider::self_stop_command); the markers are written by each command's own shell
// (activity_wrapper below), with builtins alone.
//
// The warm minimum (nodes.min_nodes, see warm_nodes.hpp) gets no watchdog: those nodes are pinned
// (details.pinned) and an installed watchdog is stopped. A node with a watchdog says so in
// details.watchdog, so that every command sent to it is wrapped (command_for).
#include "agent/provide/warm_nodes.hpp"
#include "config/settings.hpp"
#include "net/node_link.hpp"
#include "provision/node.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

namespace ferry::agent {

namespace asio = boost::asio;

// Where the watchdog and the markers live on a node: one word for the node's sh, expanded there, and
// the same for the node program (empty: the same default, which it expands itself).
struct watchdog_paths {
  std::string state_dir = "\"${XDG_STATE_HOME:-$HOME/.local/state}/ferry\"";
  std::string dir;

  // A fixed dir.
  static watchdog_paths at(const std::filesystem::path& dir);
};

// `command` (lines for the node's shell) preceded by lines that mark the node busy while the command
// runs: they write the marker and touch `last-used` with shell builtins alone, then leave the command to
// the same shell. The command runs as the process ssh_exec's wrapper reported as its process group (a
// signal to the group reaches it as before), its exit status and exit signal come back unchanged, and it
// sees no variable of the wrapper. The cost is a few builtins: no fork, no exec. Its end is noticed by the
// watchdog (the marker's process is gone), within nodes.watchdog_interval. A marker that cannot be
// written never stops the command.
std::string activity_wrapper(std::string_view command, const watchdog_paths& paths = {});

struct watchdog_settings {
  std::chrono::milliseconds idle_timeout{};  // nodes.idle_timeout; 0: never stop
  std::chrono::milliseconds interval{};      // nodes.watchdog_interval, at most idle_timeout
  watchdog_paths paths;
  std::filesystem::path program;  // agent.node_program: the node program to run it (empty: beside ferry)

  static watchdog_settings from(const config::settings& s);
  bool enabled() const { return idle_timeout.count() > 0; }
};

// details.watchdog: ferry installed a watchdog, which reads the markers of what runs there.
bool has_watchdog(const provision::node& n);
// Records the watchdog (with its settings) or its absence in n.details.
void note_watchdog(provision::node& n, const watchdog_settings* installed);

// The line to send to run `command` on `n`: wrapped when n has a watchdog.
std::string command_for(const provision::node& n, std::string_view command, const watchdog_paths& paths = {});

// Starts the watchdog on the node over one exec of the node program (installed first when the node lacks
// it), or leaves it alone when the same one runs already, or replaces one whose settings, stop command or
// program differ. A pinned node, an empty stop command or an idle
// timeout of 0 means no watchdog: one running is stopped instead. Traced as "ferry:watchdog:install".
// Fails with errc::watchdog_failed (diag naming the node and what the node said) or the link's error. The node
// program's own action, ferry:node:watchdog, goes to the node's trace file beside ferry's.
asio::awaitable<result<void>> install_watchdog(tracing::action& parent, net::node_link& link,
                                               const provision::node& n, std::string_view stop_command,
                                               const watchdog_settings& s, diagnostics& diag);

// Stops the node's watchdog, if one runs (for a node pinned after it got one). Its markers and log stay.
// Traced as "ferry:watchdog:uninstall".
asio::awaitable<result<void>> uninstall_watchdog(tracing::action& parent, net::node_link& link,
                                                 const provision::node& n, const watchdog_paths& paths,
                                                 const std::filesystem::path& program, diagnostics& diag);

}  // namespace ferry::agent
