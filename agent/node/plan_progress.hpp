#pragma once
// What the node program knows of a plan while it materialises it, without any I/O: the plan's lines as
// they come (each layer queued the first time its id arrives, its places in the plan kept), which layer a
// free worker takes next (the largest waiting: the longest ones start first, the small ones fill the gaps
// at the end), how each layer ended, and, once nothing runs, the outcome: the layers' directories in plan
// order, or the failure that matters. The first failure stops the plan: no layer is handed out after it
// (a lazy start's plan goes on: keep_going_after_failures).
// materialise_layers.hpp drives it; its tests script every step, a failure and a cancellation at each.
#include "agent/node/plan.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ferry::agent::node {

struct layer_result {
  bool cached = false;
  std::uint64_t downloaded = 0;
};

struct materialised {
  std::string cache_dir;
  std::string workdir;                   // the workspace layer's directory, or empty: none
  std::vector<std::string> python_path;  // the layers' directories, in plan order
  // The import hook's directory (python_files.hpp: the API's worker is there too), for PYTHONPATH with
  // the plan's site, and the site file the hook reads.
  std::string hook_dir;
  std::string site_file;
  std::size_t layers_cached = 0, layers_fetched = 0, layers_evicted = 0;
  std::uint64_t bytes_fetched = 0;
  // A lazy start's (import_gate.hpp): layer names in the order the command first imported them, and the
  // layers not fetched because the command ended first.
  bool lazy = false;
  std::vector<std::string> imported;
  std::size_t layers_left = 0;
};

class plan_progress {
 public:
  // shard: a shard of a layer already queued (or handed out) is now in storage; its layer_source, which
  // the worker on it holds, has its URL and digest from now on.
  enum class taken { queued, repeated, ended, catalogue, work_done, site, shard };

  // A line that followed the header. errc::bad_plan for a second header, a line after the end, a shard
  // line before its layer's or for a shard the layer has not, or an end line while a shard is still to
  // come (the plan then stops, as for reading_failed).
  result<taken> take(plan_line line, diagnostics& diag);
  // Reading the plan failed (the input ended early, a malformed line, cancelled).
  void reading_failed(error_code ec, const diagnostics& diag);

  // Whether the layer finished on this node (landed, was cached, or failed).
  bool has_finished(const std::string& id) const { return finished_.contains(id); }

  // The next layer waiting, off the queue; none when none waits, the plan stops, or it is held. It stays
  // where it is: shard lines fill in its shards still on their way.
  const layer_source* next();
  // A layer waits that nobody asked for, while one an import asked for is still to come or on its way: it
  // is not handed out until that one has finished. The caller waits for a change (a layer finished, one
  // asked for, a line came) and asks again.
  bool held() const;
  // An import waits for this layer: it goes before every other still waiting, or, when its line has not
  // come yet, as soon as it comes. False when it was handed out already.
  bool prefer(const std::string& id);
  // How a layer's work ended; a failure stops the plan, unless each failure is the failed layer's alone.
  void finished(const layer_source& layer, result<layer_result> got, const diagnostics& diag);
  // A lazy start's plan: the command runs while the layers arrive and may never import the one that
  // failed, so that layer's failure is its own (its imports raise it) and the others, the workspace the
  // command needs to start above all, still come. The failure is still the outcome once nothing runs.
  void keep_going_after_failures() { keep_going_ = true; }

  bool stopping() const { return stopping_; }
  bool ended() const { return end_.has_value(); }
  const plan_catalogue* catalogue() const { return catalogue_ ? &*catalogue_ : nullptr; }
  const plan_site* site() const { return site_ ? &*site_ : nullptr; }
  std::size_t waiting() const { return waiting_.size(); }
  // Every id the plan named so far: the layers eviction must keep.
  const std::set<std::string>& ids() const { return seen_; }

  // The failure that matters, once nothing runs: a layer's own before the plan's, the plan's before a
  // layer that merely stopped for it (operation_aborted).
  std::optional<error_code> failure(diagnostics& diag) const;
  // The environment, with `layer_dir(id)` for each place; operation_aborted when the plan never ended,
  // errc::bad_plan when a place the end line counts never came. Counts are those of finished layers.
  result<materialised> environment(const std::function<std::string(const std::string&)>& layer_dir,
                                   diagnostics& diag) const;
  // The counts of the layers finished so far (cached, fetched, bytes), whatever the plan's state.
  materialised counts() const;

 private:
  layer_source* find(const std::string& id);
  result<taken> take_shard(const plan_shard& line, diagnostics& diag);

  struct outcome {
    std::string id;
    result<layer_result> got;
    diagnostics diag;
  };

  // Each id once (equal ids are equal contents). A deque: a layer handed out stays where it is while
  // more arrive.
  std::deque<layer_source> layers_;
  // priority -> index into layers_, the highest first: content bytes, or with a catalogue its rank (a
  // preferred layer above all)
  std::multimap<std::uint64_t, std::size_t, std::greater<>> waiting_;
  std::map<std::size_t, std::string> places_;  // place in the plan -> id
  std::set<std::string> seen_;
  std::optional<plan_end> end_;
  std::optional<plan_catalogue> catalogue_;
  std::optional<plan_site> site_;
  std::uint64_t preferred_ = 0;  // layers preferred so far: the earlier asked, the sooner taken
  std::map<std::string, std::uint64_t> preferred_order_;  // id -> when it was first asked for
  std::set<std::string> finished_;
  std::vector<outcome> outcomes_;
  std::optional<error_code> reading_error_;
  diagnostics reading_diag_;
  bool stopping_ = false;
  bool keep_going_ = false;
};

}  // namespace ferry::agent::node
