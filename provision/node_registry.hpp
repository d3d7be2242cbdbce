#pragma once
// The node registry: every node ferry made and has not terminated, in one JSON file in the state dir
// (`<state>/nodes.json`), so that later commands reuse nodes, `ferry nodes` lists them without asking any
// provider, and nodes left behind can be found and terminated.
//
// Readers take no lock: writes replace the file by rename, so a reader sees one whole version. Writers
// take an flock on `<file>.lock` around read-modify-write, so two ferry commands updating at once both
// land. A file that is not what ferry writes fails with errc::bad_registry naming it, and is left alone.
//
// Changes made while a write is under way wait, and the next write carries all of them (group commit): a
// job bringing up hundreds of nodes updates the registry for each, and one whole-file write per change
// would cost the square of the node count. Writes are paced so that writing takes at most half the time
// (the gap after a write is as long as the write was), which lets batches grow with the file.
#include "config/units.hpp"
#include "net/notifier.hpp"
#include "provision/node.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace ferry::provision {

class node_registry {
 public:
  // A change to the list, made under the lock; an error aborts it and nothing is written.
  using change = std::function<error_code(std::vector<node>& nodes, diagnostics& diag)>;

  // `file` is normally registry_file(settings.dirs.state); `lock_timeout` nodes.registry_lock_timeout.
  node_registry(std::filesystem::path file, config::duration lock_timeout);

  const std::filesystem::path& file() const { return file_; }

  // The nodes as last written, in the order they were added; none when there is no file yet.
  result<std::vector<node>> load(diagnostics& diag) const;

  // Before nodes are made: the registry must be able to record them. A damaged file is renamed to
  // `<file>.damaged-<unix time>` under the lock (kept, never deleted: its nodes may still run) and
  // `notice` says so; the list then starts empty. Any other failure (unreadable, a lock not had) is an
  // error, and the caller makes no node.
  boost::asio::awaitable<result<void>> ensure_usable(tracing::action& parent, std::string& notice,
                                                     diagnostics& diag);

  // Read-modify-write under the lock, traced as `action_type`, one of tracing/action_types.hpp's registry
  // names (it must outlive the call).
  boost::asio::awaitable<result<void>> modify(tracing::action& parent, std::string_view action_type, const change& edit,
                                              diagnostics& diag);

  // Adds a node, or replaces the one with the same id.
  boost::asio::awaitable<result<void>> add(tracing::action& parent, const node& n, diagnostics& diag);
  // Replaces the node with the same id; errc::node_not_found when there is none.
  boost::asio::awaitable<result<void>> update(tracing::action& parent, const node& n, diagnostics& diag);
  // Removes the node with this id; removing one that is not there succeeds.
  boost::asio::awaitable<result<void>> remove(tracing::action& parent, std::string_view id, diagnostics& diag);

 private:
  struct waiter;
  // One batch: the lock, one read, every queued change, one write.
  boost::asio::awaitable<void> commit_next(waiter& self);
  void apply(std::vector<waiter*>& batch);
  void wake_all();

  std::filesystem::path file_;
  config::duration lock_timeout_;
  std::vector<waiter*> queue_;  // changes waiting for the next write, in their callers' frames
  bool committing_ = false;
  std::size_t callers_ = 0;  // in modify() now
  std::optional<net::notifier> turn_;  // notified when a batch is done
  std::chrono::steady_clock::time_point next_write_{};
};

std::filesystem::path registry_file(const std::filesystem::path& state_dir);

// The registry's text, and its reading (bad_registry with diag naming `file` when damaged).
std::string registry_text(const std::vector<node>& nodes);
result<std::vector<node>> parse_registry(std::string_view text, const std::filesystem::path& file, diagnostics& diag);

}  // namespace ferry::provision
