#include "provision/poll_schedule.hpp"

#include <algorithm>

namespace ferry::provision {

poll_schedule::poll_schedule(const poll_policy& policy, time_point start)
    : policy_(policy), deadline_(start + policy.timeout) {}

poll_schedule::clock::duration poll_schedule::nominal_wait(const poll_policy& policy, int n) {
  const clock::duration cap = std::max(policy.max, policy.initial);
  clock::duration wait = policy.initial;
  for (int i = 1; i < n && wait < cap; ++i) wait *= 2;  // a loop, not a shift: no overflow at large n
  return std::min(wait, cap);
}

std::optional<poll_schedule::time_point> poll_schedule::after_failure(time_point now, double jitter) {
  if (now >= deadline_) return std::nullopt;
  ++failures_;
  const auto wait = nominal_wait(policy_, failures_);
  const auto shortened = std::chrono::duration_cast<clock::duration>(wait * (1.0 - std::clamp(jitter, 0.0, 1.0) / 2));
  return std::min(now + shortened, deadline_);
}

}  // namespace ferry::provision
