#pragma once
// The layers of a job as they reach storage, for every node's node program at once: each layer becomes a
// plan line (agent/node/plan.hpp) the moment the pack has its first shard in storage, each later shard of
// it a shard line the moment it is stored, and each node reads the lines at
// its own pace, waiting for more, until the end line (the pack is done) or the end of the feed without it
// (the pack failed, and the node programs stop). So a node fetches the first layers while the pack still
// zips the rest: a cold start costs about the longer of packing and fetching, not their sum.
//
// Lives on the I/O thread, like the job that fills it.
#include "agent/node/plan.hpp"
#include "net/exec_streams.hpp"
#include "net/notifier.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ferry::agent {

class layer_feed {
 public:
  explicit layer_feed(boost::asio::any_io_executor io);
  // A whole plan at once: its layers, then its end.
  static std::unique_ptr<layer_feed> of(boost::asio::any_io_executor io, const node::environment_plan& plan);

  // How the command's Python sees the environment (plan.hpp), before the catalogue and every layer.
  void site(const node::plan_site& site);
  // Every layer, before any is in storage (a lazy start's catalogue: plan.hpp).
  void catalogue(const node::plan_catalogue& catalogue);
  // A layer is in storage, or its first shards are (plan.hpp: the others come through add_shard): `index`
  // is its place in sys.path order.
  void add(std::size_t index, const node::layer_source& layer);
  // A shard of a layer added before is in storage now.
  void add_shard(const node::plan_shard& shard);
  // Every layer is in: `layers` of them.
  void end(std::size_t layers, std::optional<std::size_t> workspace);
  // No more layers will come, and no end: readers see the input stop short.
  void abandon();

  bool ended() const { return ended_; }
  std::size_t layers() const { return layers_; }

  // stdin for the node program on `node` (its id): `header` (its own line: the task id differs per node),
  // then the feed's lines as they come. The feed must outlive it. With `lazy` (a lazy start), the input
  // does not end with the feed: once the node's work is done (work_done()), a work_done line ends it,
  // whatever is left. While it has nothing, it is not ready() (net/exec_streams.hpp): the channel goes on
  // reading the node program's messages, and the feed wakes it.
  // In a fan-out, once the node's source is known (fan_out()), a peer line goes first; while the node is
  // held, no layer line goes.
  std::unique_ptr<net::input_source> reader(std::string header, std::string node, bool lazy = false);

  // What one node's reader says beside the feed's lines. The feed keeps it, by node id; it changes only
  // through these calls, and each change wakes the readers.
  // The node's parent in the job's fan-out (agent/fanout_plan.hpp) serves at `source` (empty: none yet,
  // the node fetches from storage); while `held`, that server is on its way and the node's layer lines
  // wait for it (or for its failure), rather than going to storage for want of a few hundred milliseconds.
  void fan_out(const std::string& node, std::string source, bool held);
  // The node's layer lines wait no more.
  void release(const std::string& node);
  bool held(const std::string& node) const;
  // The work on the node is over (a lazy start): its reader ends with a work_done line.
  void work_done(const std::string& node);

 private:
  class feed_reader;
  struct node_state {
    std::string source;
    bool held = false;
    bool work_done = false;
  };
  const node_state& state_of(const std::string& node) const;
  void wake();

  std::vector<std::string> lines_;  // each with its newline
  std::map<std::string, node_state> nodes_;  // node id -> its state, for the job's life (a node runs once)
  bool ended_ = false;
  bool closed_ = false;  // ended or abandoned: nothing more comes
  std::size_t layers_ = 0;
  net::notifier changed_;  // wakes every reader when lines come or a node's state changes
  std::vector<const feed_reader*> readers_;  // each reader alive, whose channel wakes with changed_ too
};

}  // namespace ferry::agent
