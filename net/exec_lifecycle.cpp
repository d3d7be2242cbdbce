#include "net/exec_lifecycle.hpp"

#include "net/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

namespace ferry::net {
namespace {

// How often the kill line looks whether the group is gone (its `sleep 0.1`).
constexpr auto kill_poll = std::chrono::milliseconds(100);

// Asio's operation_aborted, without Asio: ECANCELED in the system category.
error_code aborted() { return {ECANCELED, boost::system::system_category()}; }

bool is_cancellation(const error_code& ec) { return ec == boost::system::errc::operation_canceled; }

}  // namespace

exec_lifecycle::exec_lifecycle(kind k, const exec_limits& limits, std::string peer, std::string command)
    : kind_(k), limits_(limits), peer_(std::move(peer)), command_(std::move(command)) {}

exec_step exec_lifecycle::next() const {
  switch (phase_) {
    case phase::opening:
      return {exec_action::open, open_delay_, learn_limit_};
    case phase::starting:
      return {exec_action::request};
    case phase::running:
      return {exec_action::pump};
    case phase::awaiting_group:
      return {exec_action::await_group, limits_.kill_grace};
    case phase::killing:
      return {exec_action::kill, limits_.kill_grace + limits_.drain_margin, std::nullopt, *group()};
    case phase::unknown:
      return {exec_action::report_unknown};
    case phase::done:
      break;
  }
  return {exec_action::finish};
}

// OpenSSH says no to a channel over MaxSessions with a bare "open failed", so any refusal while other
// channels of ours are open counts as "full" (they are the cap: wait for one to end, then ask again). One
// that persists once they are all closed is a real refusal, unless the cap is known: then the node has
// not finished closing the ones just ended, and a short delay is worth it while the deadline allows.
void exec_lifecycle::open_failed(const open_failure& f) {
  if (phase_ != phase::opening) return;
  // Only the node's own refusal: libssh's last error text may be older than a timeout or a cancellation.
  const bool full = f.ec == errc::ssh_channel_failed && f.session_open && f.for_lack_of_channels;
  if (full && f.others_open > 0) {
    learn_limit_ = f.others_open;
    open_delay_ = {};
    return;
  }
  if (full && f.capped && f.time_left > limits_.retry_delay) {
    learn_limit_.reset();
    open_delay_ = limits_.retry_delay;
    return;
  }
  failed(f.ec, f.session_open);
}

void exec_lifecycle::opened() {
  if (phase_ != phase::opening) return;
  phase_ = phase::starting;
  learn_limit_.reset();
  open_delay_ = {};
}

void exec_lifecycle::requesting() {
  if (phase_ == phase::starting) requested_ = true;
}

void exec_lifecycle::started() {
  if (phase_ == phase::starting) phase_ = phase::running;
}

std::span<const char> exec_lifecycle::take_stdout(std::span<const char> bytes) {
  if (kind_ == kind::kill) return bytes;
  return group_line_.take(bytes);
}

std::span<const char> exec_lifecycle::end_of_stdout() {
  if (kind_ == kind::kill) return {};
  return group_line_.end();
}

void exec_lifecycle::exit_status(int status) { exit_.status = status; }

void exec_lifecycle::exit_signal(std::string signal, bool core_dumped) {
  exit_.signal = std::move(signal);
  exit_.core_dumped = core_dumped;
}

void exec_lifecycle::peer_closed() { peer_closed_ = true; }

void exec_lifecycle::output_eof() { eof_ = true; }

void exec_lifecycle::completed() {
  if (phase_ == phase::running) phase_ = phase::done;
}

void exec_lifecycle::failed(const error_code& ec, bool session_open) {
  if (phase_ != phase::opening && phase_ != phase::starting && phase_ != phase::running) return;
  // The node refused the channel or the command (or never answered): nothing of it runs.
  if (phase_ != phase::running && !is_cancellation(ec)) start_refused_ = true;
  stop(ec, session_open);
}

void exec_lifecycle::cancelled(cancel_kind how, bool session_open) {
  if (phase_ != phase::opening && phase_ != phase::starting && phase_ != phase::running) return;
  cancellation_ = how;
  failed(aborted(), session_open);
}

void exec_lifecycle::stop(const error_code& ec, bool session_open) {
  error_ = ec;
  if (!may_outlive(session_open)) {
    phase_ = phase::done;
    return;
  }
  phase_ = group() ? phase::killing : phase::awaiting_group;
}

// The command's processes may still run: the node can still be reached, and ferry stopped listening
// (cancelled, or the sink or source failed) rather than the node refusing the command.
bool exec_lifecycle::may_outlive(bool session_open) const {
  return kind_ == kind::command && requested_ && !start_refused_ && session_open;
}

void exec_lifecycle::group_wait_over() {
  if (phase_ != phase::awaiting_group) return;
  phase_ = group() ? phase::killing : phase::unknown;
}

void exec_lifecycle::kill_finished(const result<exit_info>& r) {
  if (phase_ != phase::killing || kill_result_) return;
  kill_result_ = r;
  after_kill_step();
}

void exec_lifecycle::drain_over() {
  if (phase_ != phase::killing) return;
  drained_ = true;
  after_kill_step();
}

void exec_lifecycle::after_kill_step() {
  if (kill_result_ && drained_) phase_ = phase::done;
}

void exec_lifecycle::unknown_reported() {
  if (phase_ == phase::unknown) phase_ = phase::done;
}

// After a cancellation the sink still works, and what the command prints while it is being stopped is
// worth having: the node program answers TERM by ending its actions, and those lines close its part of the
// trace. After any other failure (the sink's own among them) output is read only to keep the command
// moving, and dropped.
bool exec_lifecycle::passes_output() const {
  if (phase_ == phase::running) return true;
  return cancellation_.has_value() && (phase_ == phase::awaiting_group || phase_ == phase::killing);
}

// TERM to the group; KILL once the grace is over and any of it is still there.
std::string exec_lifecycle::kill_line() const {
  const auto polls = std::max<long long>(1, limits_.kill_grace / kill_poll);
  return fmt::format(
      "g={0}; kill -s TERM -- -$g 2>/dev/null || exit 0; n=0; "
      "while kill -s 0 -- -$g 2>/dev/null; do "
      "if [ $n -ge {1} ]; then kill -s KILL -- -$g 2>/dev/null; exit 0; fi; sleep 0.1; n=$((n+1)); done",
      group().value_or(0), polls);
}

error_code exec_lifecycle::unknown_group(diagnostics& diag) const {
  diag.set(fmt::format("the process group of the command on {} is unknown: it may still run", peer_));
  return make_error_code(errc::ssh_channel_failed);
}

result<exit_info> exec_lifecycle::outcome(diagnostics& diag) const {
  if (error_) return error_;
  if (!exit_.status && exit_.signal.empty()) {
    diag.set(fmt::format("{} closed the channel of '{}' without an exit status", peer_, command_));
    return make_error_code(errc::ssh_channel_failed);
  }
  return exit_;
}

}  // namespace ferry::net
