#pragma once
// When to poll again: the sans-io schedule of readiness polling. A new node usually becomes ready within a
// second, so the first wait is short (nodes.poll_initial); a slow one should not be hammered, so the wait
// doubles up to a cap (nodes.poll_max); many nodes polling one cloud API should not poll in step, so each
// wait is shortened by a random part of up to half; and the whole wait has one deadline
// (nodes.ready_timeout), with a last attempt exactly at it rather than a give-up just before it.
#include <chrono>
#include <optional>

namespace ferry::provision {

struct poll_policy {
  std::chrono::milliseconds initial{50};
  std::chrono::milliseconds max{2000};
  std::chrono::milliseconds timeout{300000};
};

class poll_schedule {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;

  poll_schedule(const poll_policy& policy, time_point start);

  // The wait after the n-th failure in a row (n >= 1) before jitter: min(max, initial * 2^(n-1)).
  static clock::duration nominal_wait(const poll_policy& policy, int n);

  // After a failed attempt at `now`: when to try again, or nullopt when the deadline has passed. `jitter`
  // in [0, 1) shortens the wait by jitter/2 of it; 0 gives the nominal wait exactly.
  std::optional<time_point> after_failure(time_point now, double jitter);

  // A new stage starts: its first wait is the initial one again. The deadline stays.
  void restart() { failures_ = 0; }

  time_point deadline() const { return deadline_; }
  int failures() const { return failures_; }  // since the last restart

 private:
  poll_policy policy_;
  time_point deadline_;
  int failures_ = 0;
};

}  // namespace ferry::provision
