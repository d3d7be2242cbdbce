#pragma once
// Remote commands on exec channels: any number at once on one session, each streaming its stdout and
// stderr to a sink and its stdin from a source, with bounded memory (net/exec_streams.hpp), and ending
// with the command's exit status or the signal that killed it.
//
// The machinery under net/ssh_node_link.hpp's exec. Commands are lines for the login shell sshd starts,
// as with ssh, which must be a POSIX shell (quote_argv in net/shell_quote.hpp builds one from an argv).
//
// A request with `as_user` runs `sudo -n -u USER -- /bin/sh -c COMMAND` instead (run_as_command below):
// the login user needs a sudoers rule that lets it run commands as USER without a password (-n fails at
// once rather than prompt). Cancelling such a command still works: ferry's TERM reaches sudo, which passes
// it on to the command; the KILL after ssh.kill_grace reaches sudo alone, not what the command started.
//
// Cancellation kills the remote process group. sshd starts every command in a new session, so the
// login shell that runs it leads a process group of its own. ferry runs the command through a small
// wrapper that checks this (and otherwise starts a group with setsid), prints the group's id as the
// first line of stdout (ferry takes that line out again) and then runs the command's own lines in the
// same shell. No other shell is started (a shell costs the node as much as the rest of a short command),
// a final simple command is exec'd by the shell as ssh's would be, and its exit status and exit signal
// come back as they would through ssh. When exec is cancelled (per-operation cancellation or total
// cancellation), or its sink or source fails, ferry runs `kill -s TERM -- -PGID` on another channel of
// the same session, waits up to ssh.kill_grace for the group to go, then sends KILL, and only then
// returns. Neither closing the channel nor SSH's "signal"
// request would do: sshd leaves commands without a terminal running when their channel closes, and
// delivers a signal request (if at all) to the login shell alone, not to the processes it started.
// A command that starts processes in process groups of their own takes those out of ferry's reach.
//
// What a failure or a cancellation means for the remote command (kill it, or not; the group unknown) and
// what a channel's end means is decided by a sans-io core, net/exec_lifecycle.hpp, tested on its own.
//
// exec treats cancellation as an error code (operation_aborted), never an exception: it turns
// throw_if_cancelled off on its coroutine thread, as net/cancellation.hpp's accept_cancellation does.
#include "net/exit_info.hpp"
#include "net/node_link.hpp"
#include "net/ssh_session.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace ferry::net {

// Runs one command to its end. Traced as "ssh:exec" (node, command, then exit status or signal and the
// byte counts). Fails with errc::ssh_channel_failed (the node refused the channel or the command),
// errc::timeout (no channel within ssh.connect_timeout), connection_lost, peer_unresponsive,
// session_closed, operation_aborted when cancelled, or the error of the sink or source.
asio::awaitable<result<exit_info>> exec(tracing::action& parent, ssh_session& session, const exec_request& request,
                                        diagnostics& diag);

// exec with `input` as stdin and both streams collected, together up to `max_output` bytes.
asio::awaitable<result<command_output>> run_command(tracing::action& parent, ssh_session& session,
                                                    std::string command, diagnostics& diag,
                                                    std::string_view input = {},
                                                    std::size_t max_output = 16 << 20);

// The line ferry actually sends for `command` (see above). Exposed for tests.
std::string wrap_in_process_group(std::string_view command);

// The line that runs `command` as the Unix user `user` (see above). Exposed for tests.
std::string run_as_command(std::string_view user, std::string_view command);

}  // namespace ferry::net
