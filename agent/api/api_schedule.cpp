#include "agent/api/api_schedule.hpp"

#include "agent/api/frame.hpp"

#include <algorithm>

namespace ferry::agent::api {

std::optional<api_task> task_from(std::uint64_t id, std::string payload) {
  constexpr std::size_t head = 8 + 1 + 2;
  if (payload.size() < head) return std::nullopt;
  const std::string_view p = payload;
  const std::size_t n = get_u16(p.substr(9));
  if (p.size() < head + 8 * n) return std::nullopt;
  api_task t{id, get_u64(p), {}, {}, 0, 0};
  t.blobs.reserve(n);
  for (std::size_t i = 0; i < n; ++i) t.blobs.push_back(get_u64(p.substr(head + 8 * i)));
  t.payload = std::move(payload);
  return t;
}

void api_schedule::add(api_task task) {
  const auto id = task.id;
  std::size_t missing = 0;
  for (auto b : task.blobs) {
    if (stored_.contains(b)) continue;
    waiting_for_[b].push_back(id);
    ++missing;
  }
  tasks_.emplace(id, std::move(task));
  if (missing == 0) {
    queue_.push_back(id);
  } else {
    missing_[id] = missing;
  }
}

void api_schedule::blob_stored(std::uint64_t blob) {
  if (!stored_.insert(blob).second) return;
  auto it = waiting_for_.find(blob);
  if (it == waiting_for_.end()) return;
  for (auto id : it->second) {
    auto m = missing_.find(id);
    if (m == missing_.end() || --m->second > 0) continue;
    missing_.erase(m);
    if (tasks_.contains(id)) queue_.push_back(id);
  }
  waiting_for_.erase(it);
}

bool api_schedule::cancel(std::uint64_t id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return false;
  for (const auto& [w, ids] : held_)
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) return false;
  tasks_.erase(it);  // the queue skips it; a blob that comes later finds it gone
  missing_.erase(id);
  return true;
}

const api_task* api_schedule::take(worker_id w) {
  while (!queue_.empty()) {
    const auto id = queue_.front();
    queue_.pop_front();
    auto it = tasks_.find(id);
    if (it == tasks_.end()) continue;  // cancelled
    ++it->second.attempts;
    held_[w].push_back(id);
    return &it->second;
  }
  return nullptr;
}

bool api_schedule::answered(worker_id w, std::uint64_t id) {
  // Only the worker that holds the task answers it: any other answer is not about this attempt.
  auto h = held_.find(w);
  if (h == held_.end()) return false;
  auto& ids = h->second;
  auto at = std::find(ids.begin(), ids.end(), id);
  if (at == ids.end()) return false;
  ids.erase(at);
  return tasks_.erase(id) > 0;
}

std::optional<std::uint64_t> api_schedule::running(worker_id w) const {
  auto h = held_.find(w);
  if (h == held_.end() || h->second.empty()) return std::nullopt;
  return h->second.front();
}

std::size_t api_schedule::held_by(worker_id w) const {
  auto h = held_.find(w);
  return h == held_.end() ? 0 : h->second.size();
}

std::vector<std::uint64_t> api_schedule::holding(worker_id w) const {
  auto h = held_.find(w);
  return h == held_.end() ? std::vector<std::uint64_t>{} : std::vector<std::uint64_t>(h->second.begin(), h->second.end());
}

std::vector<api_schedule::failed_task> api_schedule::worker_lost(worker_id w) {
  std::vector<failed_task> failed;
  auto h = held_.find(w);
  if (h == held_.end()) return failed;
  const auto ids = std::move(h->second);
  held_.erase(h);
  // Back to the front, in the order the worker had them: the oldest goes first again.
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    auto t = tasks_.find(*it);
    if (t == tasks_.end()) continue;
    if (t->second.attempts > retries_) {
      failed.push_back({*it, t->second.attempts});
      tasks_.erase(t);
      continue;
    }
    ++retried_;
    queue_.push_front(*it);
  }
  std::reverse(failed.begin(), failed.end());
  return failed;
}

std::vector<std::uint64_t> api_schedule::fail_all() {
  std::vector<std::uint64_t> ids;
  ids.reserve(tasks_.size());
  for (const auto& [id, t] : tasks_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  tasks_.clear();
  queue_.clear();
  held_.clear();
  missing_.clear();
  waiting_for_.clear();
  return ids;
}

}  // namespace ferry::agent::api
