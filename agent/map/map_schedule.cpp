#include "agent/map/map_schedule.hpp"

#include <algorithm>

namespace ferry::agent {

map_schedule::map_schedule(std::vector<std::string> inputs, int retries) : retries_(std::max(0, retries)) {
  tasks_.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    map_task t;
    t.index = i;
    t.input = std::move(inputs[i]);
    tasks_.push_back(std::move(t));
    queue_.push_back(i);
  }
}

std::optional<std::size_t> map_schedule::take(std::string_view node, std::size_t live_nodes) {
  if (queue_.empty()) return std::nullopt;
  auto it = queue_.begin();
  if (live_nodes > 1) {
    // A task that just failed here should go to another node; this node takes the next one instead.
    auto other = std::find_if(queue_.begin(), queue_.end(), [&](std::size_t i) {
      return tasks_[i].attempts == 0 || tasks_[i].node != node;
    });
    if (other == queue_.end()) return std::nullopt;
    it = other;
  }
  const auto i = *it;
  queue_.erase(it);
  auto& t = tasks_[i];
  t.now = map_task::state::running;
  if (t.attempts == 1) ++retried_;
  ++t.attempts;
  t.node = std::string(node);
  t.error.clear();
  return i;
}

map_schedule::verdict map_schedule::again_or_fail(std::size_t i) {
  auto& t = tasks_[i];
  if (t.attempts <= retries_) {
    t.now = map_task::state::waiting;
    queue_.push_back(i);
    return verdict::retry;
  }
  t.now = map_task::state::failed;
  ++failed_;
  return verdict::failed;
}

map_schedule::verdict map_schedule::exited(std::size_t i, int code) {
  auto& t = tasks_[i];
  t.exit_code = code;
  if (code == 0) {
    t.now = map_task::state::done;
    ++done_;
    return verdict::done;
  }
  return again_or_fail(i);
}

map_schedule::verdict map_schedule::node_lost(std::size_t i, std::string why) {
  tasks_[i].error = std::move(why);
  return again_or_fail(i);
}

void map_schedule::broke(std::size_t i, std::string why) {
  auto& t = tasks_[i];
  t.error = std::move(why);
  t.now = map_task::state::failed;
  ++failed_;
}

void map_schedule::fail_waiting(const std::string& why) {
  for (auto i : queue_) {
    tasks_[i].now = map_task::state::failed;
    tasks_[i].error = why;
    ++failed_;
  }
  queue_.clear();
}

}  // namespace ferry::agent
