#pragma once
// Which task of a map runs next, and what happens after each attempt, without any I/O: tasks wait in
// input order; a node takes the first waiting task that did not just fail on that node (another node
// should try it) unless it is the only node left; an attempt that exits non-zero, or whose node is lost,
// goes back to the queue until the task has had 1 + retries attempts.
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent {

struct map_task {
  enum class state { waiting, running, done, failed };
  std::size_t index = 0;
  std::string input;
  state now = state::waiting;
  int attempts = 0;
  int exit_code = -1;      // of the last attempt that exited
  std::string node;        // of the last attempt
  std::string error;       // why the last attempt failed without an exit code
  double seconds = 0;      // of the last attempt
  std::string out, err;    // of the last attempt
};

class map_schedule {
 public:
  map_schedule(std::vector<std::string> inputs, int retries);

  enum class verdict { done, retry, failed };

  // The next task for `node` (marked running, its attempt counted); none when no task waits for it.
  std::optional<std::size_t> take(std::string_view node, std::size_t live_nodes);
  verdict exited(std::size_t i, int code);
  // The attempt failed because its node went away: the task tries again elsewhere.
  verdict node_lost(std::size_t i, std::string why);
  // The attempt failed for a reason another attempt cannot cure (output too large, cancelled).
  void broke(std::size_t i, std::string why);
  // Every waiting task fails with `why` (no node is left to run it).
  void fail_waiting(const std::string& why);

  bool finished() const { return done_ + failed_ == tasks_.size(); }
  std::size_t waiting() const { return queue_.size(); }
  std::size_t done() const { return done_; }
  std::size_t failed() const { return failed_; }
  std::size_t retried() const { return retried_; }  // tasks that needed more than one attempt
  map_task& task(std::size_t i) { return tasks_[i]; }
  const std::vector<map_task>& tasks() const { return tasks_; }

 private:
  verdict again_or_fail(std::size_t i);

  std::vector<map_task> tasks_;
  std::deque<std::size_t> queue_;
  int retries_;
  std::size_t done_ = 0, failed_ = 0, retried_ = 0;
};

}  // namespace ferry::agent
