#pragma once
// Which worker runs which task of the Python API, and what happens to a task when its worker is lost.
// Sans-io: `ferry api` (api_session.hpp) tells it what came and asks it what to send; it holds no I/O.
//
// - A task waits until every blob it names is in storage, then queues in the order it came.
// - A worker takes tasks one by one, several ahead of the one it runs (workers run theirs in order, so a
//   worker's oldest unanswered task is the one it runs now: output without a task id is that one's).
// - A result is passed on only the first time: a task that was sent again after its worker was lost is
//   answered once, whoever answers.
// - A lost worker's tasks go back to the front of the queue, each up to `retries` more times; then they
//   fail, and the client is told why.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ferry::agent::api {

struct api_task {
  std::uint64_t id = 0;
  std::uint64_t function = 0;
  std::vector<std::uint64_t> blobs;  // the blob ids its arguments name
  std::string payload;               // the client's payload, as it came
  unsigned attempts = 0;             // times it was given to a worker
  double submitted_at = 0;           // when it came, in seconds since the epoch (its trace's pending time)
};

// A `T` frame's task: its payload is u64 function, u8 flags, u16 blob count, that many u64 blob ids, then the
// pickled arguments. None when the payload is too short for what it announces.
std::optional<api_task> task_from(std::uint64_t id, std::string payload);

class api_schedule {
 public:
  using worker_id = std::size_t;

  explicit api_schedule(unsigned retries) : retries_(retries) {}

  // A task from the client (ids are the client's, each used once).
  void add(api_task task);
  // Tasks that waited for this blob may now go.
  void blob_stored(std::uint64_t blob);
  // The client cancelled it: dropped, and true, when no worker has it yet.
  bool cancel(std::uint64_t id);
  // No more tasks will come.
  void input_ended() { input_ended_ = true; }

  // The next task for worker `w`, which now holds it; none when nothing is queued.
  const api_task* take(worker_id w);
  // Worker `w` answered task `id`: true when `w` holds it, and it is then over, its answer to be passed on.
  bool answered(worker_id w, std::uint64_t id);
  // The task worker `w` runs now: its oldest unanswered one.
  std::optional<std::uint64_t> running(worker_id w) const;
  std::size_t held_by(worker_id w) const;
  // Worker `w`'s tasks, oldest first.
  std::vector<std::uint64_t> holding(worker_id w) const;

  struct failed_task {
    std::uint64_t id;
    unsigned attempts;
  };
  // Worker `w` is gone: its tasks go back to the front of the queue in their order, but those whose
  // retries are spent, which are returned (they are over).
  std::vector<failed_task> worker_lost(worker_id w);
  // Everything still queued or held fails (no worker is left to run it); returned in id order.
  std::vector<std::uint64_t> fail_all();

  // The input ended and every task was answered, failed or cancelled.
  bool finished() const { return input_ended_ && tasks_.empty(); }
  std::size_t queued() const { return queue_.size(); }
  std::size_t live() const { return tasks_.size(); }
  std::size_t retried() const { return retried_; }

 private:
  unsigned retries_;
  bool input_ended_ = false;
  std::size_t retried_ = 0;
  std::unordered_map<std::uint64_t, api_task> tasks_;  // every task not yet over
  std::deque<std::uint64_t> queue_;                     // ids ready to go; cancelled ones are skipped
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> waiting_for_;  // blob -> tasks held by it
  std::unordered_map<std::uint64_t, std::size_t> missing_;  // task -> blobs it still waits for
  std::unordered_set<std::uint64_t> stored_;                // blobs in storage
  std::unordered_map<worker_id, std::deque<std::uint64_t>> held_;  // worker -> its tasks, oldest first
};

}  // namespace ferry::agent::api
