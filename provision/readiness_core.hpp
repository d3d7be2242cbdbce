#pragma once
// The readiness state machine, sans-io: what to do next for one node and when, from what the provider
// said and how the last SSH attempt went. The async shell (readiness.hpp) only carries out its steps; the
// two speak as every sans-io core does (net/sans_io.hpp), one step at a time.
//
//   running stage: describe the node until the provider says running
//        |  pending, unknown or a failed describe: again after the next wait
//        |  stopping, stopped or terminated: failed (node_terminated)
//        v
//   ssh stage: TCP connect, SSH banner, login; on failure wait, describe once more (a node that died
//        |  meanwhile fails at once with node_terminated instead of at the deadline), and try again
//        v
//   ready
//
// Each stage starts its waits from nodes.poll_initial; the one deadline covers both stages and fails
// the node with not_running_in_time or ssh_not_ready_in_time depending on the stage it was in. A
// cancellation of any kind ends the wait at once: there is nothing to clean up.
#include "net/sans_io.hpp"
#include "provision/error.hpp"
#include "provision/node.hpp"
#include "provision/poll_schedule.hpp"

#include <optional>
#include <string_view>

namespace ferry::provision {

enum class readiness_stage { running, ssh, ready, failed };
enum class readiness_step { describe, ssh_attempt, finish };

std::string_view to_string(readiness_stage s);

class readiness_core {
 public:
  using time_point = poll_schedule::time_point;

  readiness_core(const poll_policy& policy, time_point start);

  // For a node known to run already (wait_for_ssh alone): start at the ssh stage.
  void skip_running(time_point now);

  readiness_stage stage() const { return stage_; }
  readiness_step next() const;   // what to do at next_at(); finish once ready, failed or cancelled
  bool done() const { return next() == readiness_step::finish; }
  time_point next_at() const { return next_at_; }
  time_point deadline() const { return schedule_.deadline(); }
  // Describes made in the running stage, or SSH attempts made in the ssh stage: of the stage the machine is
  // in (or ended in), or of the one asked about.
  int attempts() const { return attempts(in_ssh_ ? readiness_stage::ssh : readiness_stage::running); }
  int attempts(readiness_stage s) const { return s == readiness_stage::running ? polls_ : ssh_attempts_; }
  errc failure() const { return failure_; }   // once failed, unless cancelled
  std::optional<net::cancel_kind> cancellation() const { return cancellation_; }

  // Outcomes of the step just taken, at `now`; `jitter` in [0, 1) spreads the next wait.
  void described(node_state state, time_point now, double jitter);
  void describe_failed(time_point now, double jitter);
  void ssh_succeeded();
  void ssh_failed(time_point now, double jitter);
  // The shell heard a cancellation: the wait ends, failed, unless it has ended already.
  void cancelled(net::cancel_kind kind);

 private:
  void retry_after_failure(time_point now, double jitter);
  void fail(errc why);

  poll_schedule schedule_;
  readiness_stage stage_ = readiness_stage::running;
  bool recheck_ = false;  // in the ssh stage: the next step describes the node before the next attempt
  bool in_ssh_ = false;   // the ssh stage was reached (the current stage, or the one it ended in)
  time_point next_at_;
  int polls_ = 0;
  int ssh_attempts_ = 0;
  errc failure_{};
  std::optional<net::cancel_kind> cancellation_;
};

static_assert(net::sans_io::core<readiness_core>);

}  // namespace ferry::provision
