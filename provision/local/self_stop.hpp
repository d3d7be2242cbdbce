#pragma once
// How a local node stops itself from inside, when its watchdog finds it idle (see agent/provide/node_watchdog.hpp).
//
// The command first leaves a marker in the node's dir, so that describe can tell a node that stopped
// itself (stopped) from one whose sshd died (terminated). Then it ends the node's sshd: the listener,
// if it is still the process the node started (same start time), and its children, one per connection.
// A node with a mount namespace of its own (every node started as root) also ends every other process
// in that namespace: what commands left running in the background. Only SIGTERM: the node is idle, so
// nothing there is doing work, and whatever ignores TERM is swept with the node's network namespace by
// `ferry nodes down`, which removes the namespace, veth and dir as for any node. The process that runs
// the command and its parent (the watchdog) are spared, to report and exit by themselves.
#include "provision/local/machine.hpp"

#include <filesystem>
#include <string>

namespace ferry::provision::local {

// A line for the node's sh; empty for a machine whose sshd was never recorded.
std::string self_stop_command(const machine& m);

// The marker in the node's dir, holding why the node stopped (the watchdog passes that in
// FERRY_STOP_REASON).
std::filesystem::path self_stopped_marker(const std::filesystem::path& node_dir);

}  // namespace ferry::provision::local
