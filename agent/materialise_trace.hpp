#pragma once
// The materialise script's progress events as a live trace (the action tree in agent/materialise.hpp), the
// tallies of what the node did, and, when it failed, the error that names the node-side cause.
#include "agent/materialise.hpp"
#include "agent/materialise_progress.hpp"
#include "net/ssh_exec.hpp"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ferry::agent {

class materialise_trace {
 public:
  // `act` is the ferry:materialise action; it and `plan` outlive this object.
  materialise_trace(tracing::action& act, const environment_plan& plan, std::string node);

  void on(const progress_event& e);
  // Ends every action still open as failed with `ec` (operation_aborted: as cancelled).
  void abandon(const error_code& ec, const diagnostics& diag);

  // The error of a script that ended with `exit` without reporting ready: the first failure it reported,
  // else its exit and its stderr. The text names the node, the layer and the node's own words.
  error_code failure(const net::exit_info& exit, std::string_view node_stderr, diagnostics& diag) const;

  bool ready() const { return ready_; }
  const std::string& workdir() const { return workdir_; }
  const std::string& cache_dir() const { return cache_dir_; }
  std::size_t layers_cached() const { return layers_cached_; }
  std::size_t layers_fetched() const { return layers_fetched_; }
  std::size_t layers_evicted() const { return layers_evicted_; }
  std::uint64_t bytes_fetched() const { return bytes_fetched_; }

 private:
  struct open_layer {
    tracing::action act;
    std::map<std::pair<std::string, std::size_t>, tracing::action> steps;  // (step, shard)
  };

  const layer_source* layer_named(const std::string& id) const;
  open_layer& layer_action(const std::string& id);
  void begin(const progress_event& e);
  void end(const progress_event& e);
  void fail(const progress_event& e);
  void finish_layer(const std::string& id, const progress_event& e);
  std::string layer_text(const progress_event& e) const;
  std::string missing_text() const;

  tracing::action& act_;
  const environment_plan& plan_;
  std::string node_;
  std::map<std::string, open_layer> layers_;
  std::map<std::string, tracing::action> cache_steps_;  // steps of the cache as a whole: lock
  std::optional<progress_event> first_failure_;
  std::vector<std::string> missing_;
  std::string stray_;  // lines that were not progress, for the error text
  std::string cache_dir_;
  std::string workdir_;
  bool ready_ = false;
  std::size_t layers_cached_ = 0;
  std::size_t layers_fetched_ = 0;
  std::size_t layers_evicted_ = 0;
  std::uint64_t bytes_fetched_ = 0;
};

// The error a failed step stands for.
error_code step_error(std::string_view step);

}  // namespace ferry::agent
