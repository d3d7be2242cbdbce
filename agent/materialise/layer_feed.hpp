#pragma once
// The layers of a job as they reach storage, for every node's node program at once: each layer becomes a
// plan line (agent/node/plan.hpp) the moment the pack has it in storage, and each node reads the lines at
// its own pace, waiting for more, until the end line (the pack is done) or the end of the feed without it
// (the pack failed, and the node programs stop). So a node fetches the first layers while the pack still
// zips the rest: a cold start costs about the longer of packing and fetching, not their sum.
//
// Lives on the I/O thread, like the job that fills it.
#include "agent/node/plan.hpp"
#include "net/notifier.hpp"
#include "net/ssh_streams.hpp"

#include <boost/asio/any_io_executor.hpp>

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
  // A layer is in storage: `index` is its place in sys.path order.
  void add(std::size_t index, const node::layer_source& layer);
  // Every layer is in: `layers` of them.
  void end(std::size_t layers, std::optional<std::size_t> workspace);
  // No more layers will come, and no end: readers see the input stop short.
  void abandon();

  bool ended() const { return ended_; }
  std::size_t layers() const { return layers_; }

  // stdin for one node program: `header` (its own line: the task id differs per node), then the feed's
  // lines as they come. The feed must outlive it. With `work_done` (a lazy start), the input does not end
  // with the feed: once *work_done is true (then poke()), a work_done line ends it, whatever is left;
  // while it waits, empty lines keep the exec loop reading the node program's messages.
  // With `source` (fan-out), once *source is not empty (then poke()), a peer line goes first; while
  // *source_pending, no layer line goes.
  std::unique_ptr<net::input_source> reader(std::string header, const bool* work_done = nullptr,
                                            const std::string* source = nullptr,
                                            const bool* source_pending = nullptr);
  // Readers look again (a work_done flag changed).
  void poke() { wake(); }

 private:
  class feed_reader;
  void wake();

  std::vector<std::string> lines_;  // each with its newline
  bool ended_ = false;
  bool closed_ = false;  // ended or abandoned: nothing more comes
  std::size_t layers_ = 0;
  net::notifier changed_;  // wakes every reader when lines come
};

}  // namespace ferry::agent
