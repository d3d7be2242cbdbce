#pragma once
// The life of one exec channel, sans-io (net/ssh_exec.hpp says what ferry does and why): the decisions
// from asking for a channel to the command's end, and, when ferry stops listening before that end, the
// kill of the command's process group. The shell (net/ssh_exec.cpp and net/ssh_exec_channel.cpp) makes
// the libssh calls and does the waiting, tells the core what happened, and does what next() says: one
// action at a time, as net/sans_io.hpp has every core speak.
//
//   open ──refused for lack of channels──> open again (once one of ours ends; or after a short delay
//     │                                    when none of ours is open but the node's cap is known)
//     v
//   request ──> pump ──the command ended──> finish: its exit status or signal (neither: ssh_channel_failed)
//
//   A failure or a cancellation on the way finishes with its error, after a kill when the command may
//   outlive it: the command was asked for and not refused, the session is still open, and this is not
//   the kill's own channel. The kill needs the group id line: await_group reads stdout for it during
//   the grace; without it, report_unknown says the command may still run. Otherwise kill runs the kill
//   line on another channel while this one is drained, and both end before the core finishes.
//
// Every kind of cancellation (partial, total, terminal) starts the kill, and none stops it once
// started: the kill is the cleanup that cancellation asks for, so the shell shields it, and its time is
// bounded by the grace and the drain margin (and the start's connect timeout) instead. The first
// failure or cancellation is the result; later ones change nothing.
#include "net/cancellation.hpp"
#include "net/exec_group_line.hpp"
#include "net/exit_info.hpp"
#include "net/sans_io.hpp"
#include "tracing/diagnostics.hpp"

#include <chrono>
#include <optional>
#include <span>
#include <string>

namespace ferry::net {

using namespace std::chrono_literals;

struct exec_limits {
  std::chrono::milliseconds kill_grace{};  // ssh.kill_grace: TERM, then KILL after this long
  // How long past the grace the killed command's output is still read: its exit comes after the kill.
  std::chrono::milliseconds drain_margin = 2s;
  // How long to wait before asking a full node again for a channel when none of ours is left to end.
  std::chrono::milliseconds retry_delay = 20ms;
};


enum class exec_action {
  open,            // ask for a channel once the session has a slot for it (after `wait`, when set)
  request,         // send the exec request and wait for its confirmation
  pump,            // move bytes until ended(), a failure or a cancellation
  await_group,     // read and drop stdout until group() is known, the command ended, or `wait` passed
  kill,            // run kill_line() on another channel; meanwhile drain this one for at most `wait`
  report_unknown,  // the group is unknown: fail the kill with unknown_group(), then unknown_reported()
  finish,          // done: outcome()
};

struct exec_step {
  exec_action action = exec_action::finish;
  std::chrono::milliseconds wait{0};  // open: delay before asking; await_group, kill: the time allowed
  std::optional<int> learn_limit;     // open: the node's channel cap, as its refusal taught it
  long group = 0;                     // kill: the process group to kill
};

// Why the node did not open a channel.
struct open_failure {
  error_code ec;
  bool session_open = true;
  bool for_lack_of_channels = false;  // libssh says "Channel opening failure" (OpenSSH over MaxSessions)
  int others_open = 0;                // channels of ours open besides the one refused
  bool capped = false;                // the session knew the node's cap already
  std::chrono::milliseconds time_left{0};  // until the start's deadline
};

class exec_lifecycle {
 public:
  enum class kind {
    command,  // runs through wrap_in_process_group; its first stdout line is the group id
    kill,     // ferry's own kill of a cancelled command: never killed in turn
  };

  exec_lifecycle(kind k, const exec_limits& limits, std::string peer, std::string command);

  // What to do now; the same until an event changes it.
  exec_step next() const;
  bool done() const { return phase_ == phase::done; }  // next() is finish

  // ---- Starting ----
  void open_failed(const open_failure& f);
  void opened();
  void requesting();  // the exec request is about to go out: from now on the command may run
  void started();     // the node confirmed it

  // ---- Running ----
  // The command's output in stdout `bytes`: what is left once the group id line is taken out.
  std::span<const char> take_stdout(std::span<const char> bytes);
  // The output ended (the command ended): what was held back waiting for a group id line that never came.
  std::span<const char> end_of_stdout();
  void exit_status(int status);
  void exit_signal(std::string signal, bool core_dumped);
  void peer_closed();
  void output_eof();
  void completed();  // the command ended and all its output was passed on

  // ---- Failures, at any step: a libssh call, the session, the sink or the source, a deadline ----
  void failed(const error_code& ec, bool session_open);
  void cancelled(cancel_kind how, bool session_open);

  // ---- Stopping a command that may outlive ferry's interest ----
  void group_wait_over();  // await_group ended: the line came, the command ended, or the time ran out
  void kill_finished(const result<exit_info>& r);
  void drain_over();
  void unknown_reported();

  // ---- What the shell asks ----
  bool passes_output() const;  // while pumping, and while stopping after a cancellation
  bool exited() const { return exit_.status || !exit_.signal.empty() || peer_closed_; }
  bool ended() const { return eof_ && exited(); }
  bool requested() const { return requested_; }
  std::optional<long> group() const { return group_line_.group(); }
  std::optional<cancel_kind> cancellation() const { return cancellation_; }
  std::string kill_line() const;
  error_code unknown_group(diagnostics& diag) const;
  const std::optional<result<exit_info>>& kill_result() const { return kill_result_; }
  // Once next() is finish. `diag` gets the text when the core itself found the failure.
  result<exit_info> outcome(diagnostics& diag) const;

 private:
  enum class phase { opening, starting, running, awaiting_group, killing, unknown, done };

  void stop(const error_code& ec, bool session_open);
  bool may_outlive(bool session_open) const;
  void after_kill_step();

  kind kind_;
  exec_limits limits_;
  std::string peer_;
  std::string command_;
  phase phase_ = phase::opening;

  std::chrono::milliseconds open_delay_{0};
  std::optional<int> learn_limit_;
  bool requested_ = false;
  bool start_refused_ = false;
  exec_group_line group_line_;

  exit_info exit_;
  bool peer_closed_ = false;
  bool eof_ = false;

  error_code error_;
  std::optional<cancel_kind> cancellation_;
  std::optional<result<exit_info>> kill_result_;
  bool drained_ = false;
};

static_assert(sans_io::core<exec_lifecycle>);

}  // namespace ferry::net
