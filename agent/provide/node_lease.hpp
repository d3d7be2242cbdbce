#pragma once
// A pool lease as the node sees it (docs/pool.md, "When a lease expires"): its expiry in a file on the
// node, <cache>/leases/<lease-id>, which the agent moves forward with each renewal (set_node_lease), and
// the node program's lease-run around each command the lease covers (wrap_in_lease), which ends the
// command once the file's expiry has passed: an agent that crashed or stalled stops renewing, and its
// commands end on the node when its slots go to the next agent.
#include "agent/provide/node_program.hpp"
#include "agent/run/task_command.hpp"
#include "net/node_link.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::agent {

// The lease's file on the node, under `cache_dir` (the node's cache directory as node_program.hpp resolves
// it; when empty, the XDG default as the node's sh expands it). Throws std::invalid_argument for a lease
// id that is not letters, digits and '-' (ids are ferry's own: a bad one is a bug).
std::string lease_file(const std::string& cache_dir, std::string_view lease_id);

// Writes the lease's expiry (seconds since the epoch) on the node behind `link` (`ferry-node lease-set`,
// which must be installed there: install_node_program). An expiry earlier than the one the node holds
// already (a renewal that arrived late) leaves it as it is, and succeeds. Traced as ferry:node:lease
// {node, lease, expires_at} -> kept (true when the node held a later one). Fails with node_lacks_tools
// when the program is not on the node, node_lease_failed when it could not write the file, or the link's
// errors.
asio::awaitable<result<void>> set_node_lease(tracing::action& parent, net::node_link& link, const node_program& program,
                                             const std::string& cache_dir, std::string lease_id,
                                             std::int64_t expires_at, diagnostics& diag);

// Makes `line` run under the lease: the node's sh execs `ferry-node lease-run FILE --grace G -- /bin/sh -c
// COMMAND`, so that COMMAND (with its stdin: the --env assignments) runs as before, in a process group of
// its own that the node ends once the lease has expired (TERM, then KILL after `grace`: ssh.kill_grace),
// and its exit status or signal is the command's own. An expired lease ends it with exit status
// lease_expired_exit (124) and the stderr line "ferry-node: lease ID expired at T: command ended". The
// lease file must exist before the command starts (set_node_lease): without it, exit 2.
void wrap_in_lease(task_line& line, const node_program& program, const std::string& cache_dir,
                   std::string_view lease_id, std::chrono::seconds grace);

}  // namespace ferry::agent
