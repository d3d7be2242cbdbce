#pragma once
// The nodes of one job. Warm nodes from the registry come first (those of the configured provider that
// were running, most recently used first): each is taken as soon as a link to it opens, and one
// that does not answer is ended and forgotten. The rest are made by the provider in one call and each is
// handed over the moment it is ready, so a job's work on one node starts while others still boot. A node
// made here stays up afterwards as a warm node, pinned or watched (join_warm_pool).
//
// With pool.name set, the nodes are a team pool's instead (node_pool_lease.cpp): each node is a lease of one
// slot, taken from storage (agent/pool/pool_lease.hpp), renewed while the work runs and given back after
// it; a lease found lost ends the work on that node. A job's leases are on different nodes.
//
// Trace: `ferry:provision` holds `ferry:provision:create` (the provider's call) and one
// `ferry:provision:node` per node (field `node`, and `warm`), which holds the readiness waits.
#include "agent/cli/command_context.hpp"
#include "agent/pool/pool_lease.hpp"
#include "agent/provide/node_access.hpp"
#include "agent/provide/node_program.hpp"
#include "agent/provide/pool_access.hpp"
#include "agent/provide/pool_node_maker.hpp"
#include "net/async_event.hpp"
#include "net/node_link.hpp"
#include "provision/node.hpp"
#include "provision/provider.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ferry::agent {

struct ready_node {
  provision::node node;
  std::shared_ptr<net::node_link> link;
  bool warm = false;  // from the registry, not made for this job
  // A pool's node: the job's lease of it, and its expiry as last renewed (node_pool_lease.cpp).
  std::string lease_id;
  std::int64_t lease_expires_at = 0;
  // A team pool's node: the Unix user the job's commands run as there (agent/node/tenant_account.hpp);
  // empty outside a pool.
  std::string tenant_user;
};

// A job's work on one node; runs in its own coroutine, as many at once as there are ready nodes.
using node_work = std::function<boost::asio::awaitable<void>(ready_node&)>;

struct provision_report {
  std::size_t warm = 0;     // nodes taken from the registry
  std::size_t created = 0;  // nodes made and ready
  std::size_t failed = 0;   // nodes made that never became ready, and warm ones that did not answer
  std::vector<std::string> failures;  // "node: why", one per failure
  std::chrono::steady_clock::duration until_ready{};  // from the start until the last node was ready

  // One node failed: counted, and said as "id: why".
  void fail(const std::string& id, const error_code& ec, const diagnostics& diag);
};

class node_pool {
 public:
  node_pool(const command_context& ctx, node_access& access, provision::provider& provider);

  // Gets `count` nodes and runs `work` on each as soon as it is ready; returns when every piece of work
  // has returned. Nodes stay up and in the registry afterwards (the warm pool), marked as just used.
  boost::asio::awaitable<provision_report> run_on_nodes(tracing::action& job, std::size_t count, node_work work);

  // More nodes for the same job while it runs (a map whose tasks wait), with the same hand-over.
  boost::asio::awaitable<provision_report> add_nodes(tracing::action& job, std::size_t count, node_work work);

  // Nodes come from the team pool that pool.name names, in `storage`, from now on.
  void use_pool(net::s3_client& storage) { storage_ = &storage; }
  bool pooled() const { return storage_ != nullptr; }
  // The node program and cache dir through which each renewal moves the lease's expiry on the node too
  // (node_lease.hpp), once the job has put the program there.
  void lease_files(std::shared_ptr<const node_program> program, std::string cache_dir) {
    program_ = std::move(program);
    cache_dir_ = std::move(cache_dir);
  }

 private:
  // The group action of one round of provisioning: it ends when its last node is ready or has failed,
  // while the work on the nodes goes on.
  struct round {
    tracing::action act;
    tracing::action& job;  // the job's action: renewals and give-backs outlive the round
    std::size_t pending;
    provision_report* report;

    void one_done() {
      if (pending > 0 && --pending == 0)
        act.succeed({{"warm", report->warm}, {"created", report->created}, {"failed", report->failed}});
    }
  };
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

  // ---- a team pool's nodes (node_pool_lease.cpp) ----
  boost::asio::awaitable<result<void>> open_pool(tracing::action& act, diagnostics& diag);
  boost::asio::awaitable<result<void>> open_pool_once(tracing::action& act, diagnostics& diag);
  // Whether this agent's pool provider lists the node, and its state there.
  boost::asio::awaitable<std::pair<bool, provision::node_state>> provider_view(tracing::action& act,
                                                                              const provision::node& n);
  boost::asio::awaitable<void> lease_nodes(round& r, std::size_t count, node_work& work);
  // One node of the round: a lease, a link to its node, the work under the lease; a node found gone is
  // dropped from the pool and another leased in its place.
  boost::asio::awaitable<void> lease_slot(round& r, node_work& work);
  boost::asio::awaitable<result<pool::held_lease>> acquire_one(round& r, diagnostics& diag);
  boost::asio::awaitable<result<std::shared_ptr<net::node_link>>> link_to(tracing::action& act,
                                                                          const provision::node& n,
                                                                          const pool::held_lease& held,
                                                                          diagnostics& diag);
  // The work on a leased node while the lease is renewed every third of its TTL; a lease lost cancels the
  // work. The lease is given back afterwards (when it was not lost).
  boost::asio::awaitable<void> work_under_lease(round& r, ready_node& rn, pool::held_lease held, node_work& work);
  boost::asio::awaitable<void> give_back(tracing::action& act, const pool::held_lease& held);
  // A node that did not answer, removed from the pool when it is gone: its provider (when it is ours and
  // lists it) says it stopped, or, not ours to ask, it had been idle past pool.idle_timeout when the job
  // took it and nobody else holds it. Its pinned host key goes with it. True when its record is gone;
  // `ferry:pool:node_kept` says why a node stays.
  boost::asio::awaitable<bool> drop_if_gone(tracing::action& act, const pool::held_lease& held,
                                            const provision::node& n, const std::string& reason);
  void forget_held(const std::string& node_id);

  const command_context& ctx_;
  node_access& access_;
  provision::provider& provider_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::string> taken_;  // ids already handed over in this job
  net::s3_client* storage_ = nullptr;  // the pool's storage; null: no pool
  std::optional<pool_access> pool_;
  std::unique_ptr<provision::provider> pool_provider_;  // authorises the pool's key on the nodes it makes
  std::unique_ptr<pool_node_maker> maker_;
  std::unique_ptr<net::async_event> opening_;  // set once the pool is opened, or failed to open
  error_code open_error_;
  diagnostics open_diag_;
  std::vector<std::string> held_;  // pool nodes this job holds a lease on, or found gone
  std::shared_ptr<const node_program> program_;
  std::string cache_dir_;
};

}  // namespace ferry::agent
