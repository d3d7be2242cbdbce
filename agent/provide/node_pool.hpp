#pragma once
// The nodes of one job. Warm nodes from the registry come first (those of the configured provider that
// were running, most recently used first): each is taken as soon as a link to it opens, and one
// that does not answer is ended and forgotten. The rest are made by the provider in one call and each is
// handed over the moment it is ready, so a job's work on one node starts while others still boot. A node
// made here stays up afterwards as a warm node, pinned or watched (join_warm_pool).
//
// Trace: `ferry:provision` holds `ferry:provision:create` (the provider's call) and one
// `ferry:provision:node` per node (field `node`, and `warm`), which holds the readiness waits.
#include "agent/cli/command_context.hpp"
#include "agent/provide/node_access.hpp"
#include "net/node_link.hpp"
#include "provision/node.hpp"
#include "provision/provider.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ferry::agent {

struct ready_node {
  provision::node node;
  std::shared_ptr<net::node_link> link;
  bool warm = false;  // from the registry, not made for this job
};

// A job's work on one node; runs in its own coroutine, as many at once as there are ready nodes.
using node_work = std::function<boost::asio::awaitable<void>(ready_node&)>;

struct provision_report {
  std::size_t warm = 0;     // nodes taken from the registry
  std::size_t created = 0;  // nodes made and ready
  std::size_t failed = 0;   // nodes made that never became ready, and warm ones that did not answer
  std::vector<std::string> failures;  // "node: why", one per failure
  std::chrono::steady_clock::duration until_ready{};  // from the start until the last node was ready
};

class node_pool {
 public:
  node_pool(const command_context& ctx, node_access& access, provision::provider& provider);

  // Gets `count` nodes and runs `work` on each as soon as it is ready; returns when every piece of work
  // has returned. Nodes stay up and in the registry afterwards (the warm pool), marked as just used.
  boost::asio::awaitable<provision_report> run_on_nodes(tracing::action& job, std::size_t count, node_work work);

  // More nodes for the same job while it runs (a map whose tasks wait), with the same hand-over.
  boost::asio::awaitable<provision_report> add_nodes(tracing::action& job, std::size_t count, node_work work);

 private:
  struct round;
  boost::asio::awaitable<void> take_warm(round& r, provision::node n, node_work& work);
  boost::asio::awaitable<void> make_new(round& r, std::size_t count, node_work& work);
  boost::asio::awaitable<void> ready_new(round& r, provision::node n, node_work& work);
  boost::asio::awaitable<void> mark_used(tracing::action& act, provision::node& n);
  void fail_create(round& r, tracing::action& create, std::size_t count, const error_code& ec,
                   const diagnostics& diag);
  // Every node of one create call into the registry, in one write.
  boost::asio::awaitable<result<void>> record_all(tracing::action& act, const std::vector<provision::node>& nodes,
                                                  diagnostics& diag);
  // A node made for a job stays as a warm node: pinned while the provider has fewer than nodes.min_nodes,
  // otherwise watched by an idle watchdog that stops it after nodes.idle_timeout (node_watchdog.hpp).
  boost::asio::awaitable<void> join_warm_pool(tracing::action& act, provision::node& n, net::node_link& link);
  void note_ready(provision_report& report);
  // The job was cancelled during a node's set-up: its action ends as cancelled, and it is not handed over.
  static void set_up_cancelled(round& r, tracing::action& act);

  const command_context& ctx_;
  node_access& access_;
  provision::provider& provider_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::string> taken_;  // ids already handed over in this job
};

}  // namespace ferry::agent
