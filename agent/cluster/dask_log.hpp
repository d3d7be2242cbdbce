#pragma once
// What ferry learns from a Dask scheduler's and worker's log (distributed's INFO lines on stderr), without
// any I/O: where the scheduler listens, where its dashboard is, that a worker registered, and which
// clients are connected (a cluster with none is idle). The lines are distributed's own (2022.12, Debian
// 12's python3-distributed); a line this does not know is nothing.
//
//   distributed.scheduler - INFO -   Scheduler at:   tcp://10.200.0.2:40457
//   distributed.scheduler - INFO -   dashboard at:          10.200.0.2:8787
//   distributed.worker - INFO -         Registered to:   tcp://10.200.0.2:40457
//   distributed.scheduler - INFO - Receive client connection: Client-9f0c...
//   distributed.scheduler - INFO - Remove client Client-9f0c...
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace ferry::agent {

struct dask_address {
  std::string host;  // as the scheduler printed it; empty: every address of its node
  std::uint16_t port = 0;
};

// "tcp://H:P" or "H:P" (the host may be empty, or a bracketed IPv6 address); none for anything else.
std::optional<dask_address> parse_dask_address(std::string_view text);

// One log's lines, split as they come in chunks, and what they said so far.
class dask_log {
 public:
  // A chunk of output: each complete line is read; a partial one waits for the rest.
  void feed(std::string_view bytes);

  const std::optional<dask_address>& scheduler() const { return scheduler_; }
  const std::optional<dask_address>& dashboard() const { return dashboard_; }
  bool registered() const { return registered_; }
  std::size_t clients() const { return clients_.size(); }
  // Bumped by every line that changed one of the above: a waiter looks again when it moved.
  std::uint64_t changes() const { return changes_; }
  // The last few lines, for a failure's message (a Python traceback ends there).
  std::string tail() const;

 private:
  void line(std::string_view text);

  std::string partial_;
  std::optional<dask_address> scheduler_, dashboard_;
  bool registered_ = false;
  std::set<std::string, std::less<>> clients_;
  std::uint64_t changes_ = 0;
  std::string tail_[8];
  std::size_t lines_ = 0;
};

}  // namespace ferry::agent
