#include "provision/readiness_core.hpp"

namespace ferry::provision {
namespace {

// States from which a node does not come back to running by waiting: EC2's stopping and stopped need a
// start call, terminated is final.
bool is_gone(node_state s) {
  return s == node_state::stopping || s == node_state::stopped || s == node_state::terminated;
}

}  // namespace

std::string_view to_string(readiness_stage s) {
  switch (s) {
    case readiness_stage::running: return "running";
    case readiness_stage::ssh: return "ssh";
    case readiness_stage::ready: return "ready";
    case readiness_stage::failed: break;
  }
  return "failed";
}

readiness_core::readiness_core(const poll_policy& policy, time_point start)
    : schedule_(policy, start), next_at_(start) {}

void readiness_core::skip_running(time_point now) {
  stage_ = readiness_stage::ssh;
  in_ssh_ = true;
  recheck_ = false;
  ssh_attempts_ = 0;
  next_at_ = now;
  schedule_.restart();
}

readiness_step readiness_core::next() const {
  switch (stage_) {
    case readiness_stage::running: return readiness_step::describe;
    case readiness_stage::ssh: return recheck_ ? readiness_step::describe : readiness_step::ssh_attempt;
    case readiness_stage::ready:
    case readiness_stage::failed: break;
  }
  return readiness_step::finish;
}

void readiness_core::described(node_state state, time_point now, double jitter) {
  if (stage_ == readiness_stage::running) ++polls_;
  if (is_gone(state)) return fail(errc::node_terminated);
  if (state != node_state::running) return retry_after_failure(now, jitter);
  if (stage_ == readiness_stage::running) return skip_running(now);
  recheck_ = false;  // still running: try SSH again now, the wait was taken before the describe
  next_at_ = now;
}

void readiness_core::describe_failed(time_point now, double jitter) {
  if (stage_ == readiness_stage::running) ++polls_;
  retry_after_failure(now, jitter);
}

void readiness_core::ssh_succeeded() {
  ++ssh_attempts_;
  stage_ = readiness_stage::ready;
}

void readiness_core::ssh_failed(time_point now, double jitter) {
  ++ssh_attempts_;
  retry_after_failure(now, jitter);
  if (stage_ == readiness_stage::ssh) recheck_ = true;
}

void readiness_core::cancelled(net::cancel_kind kind) {
  if (done()) return;
  cancellation_ = kind;
  stage_ = readiness_stage::failed;
}

void readiness_core::retry_after_failure(time_point now, double jitter) {
  const auto next = schedule_.after_failure(now, jitter);
  if (!next) return fail(stage_ == readiness_stage::running ? errc::not_running_in_time : errc::ssh_not_ready_in_time);
  next_at_ = *next;
}

void readiness_core::fail(errc why) {
  stage_ = readiness_stage::failed;
  failure_ = why;
}

}  // namespace ferry::provision
