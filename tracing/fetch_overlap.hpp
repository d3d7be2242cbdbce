#pragma once
// How much of a job's layer fetching on its nodes overlapped its pack (`ferry trace stats`): a layer goes to
// the nodes at its first stored shard and each later shard as it is stored (agent/node/plan.hpp), so a node
// can fetch while the pack still zips and uploads. From a job's subtree: the pack action, each shard
// upload's end (ferry:packaging:upload, {layer_id, shard}), and each node's shard fetch
// (ferry:materialise:shard, {layer, shard}).
#include "tracing/action_interval.hpp"
#include "tracing/percentiles.hpp"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ferry::tracing {

struct fetch_overlap {
  bool packed = false;             // the job has a pack action
  interval pack;                   // unix times
  std::size_t fetches = 0;         // node shard fetches in the job
  std::size_t fetches_early = 0;   // ... that started before the pack ended
  double fetching = 0;             // seconds in which some node fetched a shard (the union of the fetches)
  double fetching_in_pack = 0;     // ... of them before the pack ended
  // Of each shard uploaded in this job and fetched by a node: from the upload's end to the first node
  // fetch of it starting (a fetch from a peer counts). A shard waits no longer than its line takes.
  percentiles upload_to_fetch;

  bool measured() const { return packed && fetches > 0; }
};

// Gathers what fetch_overlap is made of, action by action, in any order.
class fetch_overlap_scanner {
 public:
  // Every action of the job's subtree, with its interval (action_interval).
  void action(const tree_node& n, const interval& time);
  fetch_overlap finish() const;

 private:
  bool packed_ = false;
  interval pack_;
  std::vector<interval> fetches_;
  std::map<std::pair<std::string, std::uint64_t>, double> uploaded_;       // (layer id, shard) -> upload end
  std::map<std::pair<std::string, std::uint64_t>, double> first_fetched_;  // (layer id, shard) -> first start
};

}  // namespace ferry::tracing
