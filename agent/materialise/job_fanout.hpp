#pragma once
// One job's fan-out (agent/materialise/fanout_plan.hpp) as its nodes see it: the job's secret token, each node's
// role as it arrives (its parent's server, once known, goes to it as a peer line through the feed), and
// the `ferry-node serve` of each node that has children, from before its own layers until its children
// have theirs (or nodes.fanout_wait has passed since its own work ended without them).
//
// On (nodes.fanout) for jobs of more than nodes.fanout_min nodes. Lives on the I/O thread, in the job.
#include "agent/materialise/fanout_plan.hpp"
#include "agent/materialise/layer_feed.hpp"
#include "agent/materialise/materialise.hpp"
#include "agent/provide/node_pool.hpp"
#include "config/settings.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <map>
#include <string>

namespace ferry::agent {

class job_fanout {
 public:
  job_fanout(const config::nodes_settings& settings, std::size_t expected, layer_feed& feed);

  // Whether a job of `count` nodes fans out.
  static bool wanted(const config::nodes_settings& settings, std::size_t count);

  struct arrival {
    fanout_role role;     // for the node's materialise
    bool serves = false;  // run serve() beside the node's steps
    bool held = false;    // its layers wait for its parent's server: run stop_holding_after_limit() beside
  };
  arrival arrive(const provision::node& n);
  // The node's materialise ended, whichever way.
  void landed(const std::string& node) { plan_.landed(node); }

  // A child whose parent's server is not listening yet holds its layers back at most nodes.fanout_hold,
  // then goes to storage (it takes the peer for later layers if the server comes): a parent that must
  // first receive the node program would otherwise delay every level of the tree below it.
  // It ends as soon as the node holds back no more (the server listens or is gone), or its steps end.
  boost::asio::awaitable<void> stop_holding_after_limit(const std::string& node);
  void steps_ended(const std::string& node) { end_hold(node); }
  // For other things a node hands on through its server (the Python API's blobs): the server `node`
  // fetches from (http://HOST:PORT, empty: storage), its parent, and what the server asks of peers.
  std::string source_of(const std::string& node) const { return plan_.source_of(node); }
  std::optional<std::string> parent_of(const std::string& node) const { return plan_.parent_of(node); }
  const std::string& token() const { return token_; }

  // The job's work is over everywhere: no child will need another layer, so every server ends now.
  void work_over() { work_over_ = true; }

  // The node's server, until `steps_over` and its children settled (or the wait after that passed).
  boost::asio::awaitable<void> serve(tracing::action& act, ready_node& node, const materialise_options& options,
                                     const bool& steps_over);

 private:
  void listening(const provision::node& n, unsigned port);
  // The node's server ended (or never listened): its children wait for it no more.
  void stopped_serving(const std::string& node);
  // The node's hold is over: its timer, if one runs, ends now rather than at nodes.fanout_hold (the job
  // waits for every part of a node, and a hold of minutes would hold up the job's end).
  void end_hold(const std::string& node);

  fanout_plan plan_;
  layer_feed& feed_;      // each node's source and hold, which its reader reads
  std::string token_;     // 64 hex digits: what a node's server asks of the peers
  std::string serve_id_;  // the copies' directory name on every node
  std::chrono::milliseconds wait_;
  std::chrono::milliseconds hold_;
  bool work_over_ = false;
  std::map<std::string, bool> serves_;  // node -> it runs a server (or tries to)
  std::map<std::string, boost::asio::steady_timer*> holds_;  // node -> the timer of its running hold
};

}  // namespace ferry::agent
