#pragma once
// One job (`ferry run`, `ferry map`, `ferry warmup`): the project is packed while nodes are provided, and
// each node, as soon as it is ready, materialises the layers, each one as soon as it is in storage
// (agent/materialise/layer_feed.hpp); then the job's own work runs there. Pack, provision and materialise overlap;
// every node goes at its own pace.
//
// Trace, inside the job's action: `ferry:pack` alongside `ferry:provision` (node_pool.hpp), then per node
// `ferry:materialise` (materialise.hpp), then whatever the job's work writes (`ferry:agent:task`). A pack
// that fails cancels the provisioning beside it.
#include "agent/cli/command_context.hpp"
#include "agent/materialise/job_fanout.hpp"
#include "agent/materialise/materialise.hpp"
#include "agent/provide/node_access.hpp"
#include "agent/provide/node_pool.hpp"
#include "agent/pack/pack_job.hpp"
#include "net/async_event.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ferry::agent {

// What a node holds for the job, and the node itself.
struct job_node {
  ready_node& ready;
  const environment& env;
};

using job_work = std::function<boost::asio::awaitable<void>(job_node&)>;

// Where the start-up time went: the line every run ends with.
struct startup_times {
  double pack = 0;            // seconds from the start until the layers were in storage
  std::size_t layers = 0;
  std::size_t layers_cached = 0;  // already in storage
  double nodes = 0;           // until the last node was ready
  std::size_t nodes_new = 0;
  std::size_t nodes_warm = 0;
  double env = 0;             // the longest a node spent on its layers after both it and the pack were done
                              // (it starts on each layer as soon as that one is stored)
  std::size_t layers_fetched = 0;  // downloads over all nodes
  double ready = 0;           // from the start until the last node began the work
  bool lazy = false;          // the work began once the workspace was in place (agent.lazy_start)
  double first_line = -1;     // from the start until the command's first output; < 0: none yet
  double first_work = -1;     // from the start until the first node began the work; < 0: none did
  double work_end = -1;       // from the start until the work ended (the command, a map's last task)
};

// "ready in 1.3 s: pack 0.4 s (12/14 cached), nodes 0.6 s (1 new), env 0.2 s (2 layers); ran 4.1 s;
// 0.1 s after the work" (`total`: seconds from the start until now; what followed the work is said only
// once the work has ended)
std::string startup_line(const startup_times& t, double ran, double total);

class job {
 public:
  job(const command_context& ctx, tracing::action& act);
  ~job();

  // Storage, ferry's key, the node registry and the provider (`provider`: "" = nodes.provider). Bad
  // settings fail here, before anything starts.
  result<void> open(std::string_view provider, diagnostics& diag);

  // Lazy start (agent/node/import_gate.hpp): the work begins on a node once the workspace is there, and
  // the node program serves its imports while the rest lands. Set before run().
  void lazy_start(bool on) { lazy_ = on; }
  // The command runs Python with `program` (task_command.hpp's python_program): before its first task on
  // a node, that interpreter there is checked against the one the environment was packed with
  // (python_check.hpp). Set before run().
  void check_python(std::string program) { python_ = std::move(program); }
  bool lazy() const { return lazy_; }
  // The command's first output arrived (run and map call it): the start-up line's "first line at".
  void first_output();
  // Work on a node ended (a command, a map's task): the last call marks the work's end, which the
  // start-up line tells apart from what followed it.
  void work_ended();
  double since_start() const;

  // Packs while `count` nodes are provided; runs `work` on each node once its environment is in place.
  // Fails when the pack fails, or when no node got as far as the work; nodes that failed are in
  // failures() either way.
  boost::asio::awaitable<result<void>> run(std::size_t count, job_work work, diagnostics& diag);

  // More nodes while run() runs (a map whose tasks wait, a node lost): the same path, the same work.
  boost::asio::awaitable<void> add_nodes(std::size_t count);

  // The job's work is over everywhere (a map whose last task has ended): nodes that have not begun it stop
  // their steps now (their layers, their start), fan-out servers stop holding, and a node that becomes
  // ready later gets nothing. No layer is waited for that no work will import. Their actions end as
  // cancelled; they are not failures.
  void work_over();
  bool is_work_over() const { return work_over_; }

  // What a new node took in this job from being asked for until its work began (the quickest one so far),
  // or nodes.start_estimate before one has.
  double new_node_seconds() const;

  const startup_times& times() const { return times_; }
  const std::vector<std::string>& failures() const { return failures_; }
  const pack_outcome* packed() const { return packed_ ? &*packed_ : nullptr; }
  // The storage the job packs into (open() made it).
  net::s3_client& storage() { return *storage_->s3; }
  // How the node program is reached (open() loaded it): for other work on the nodes, such as staging.
  const materialise_options& node_options() const { return materialise_; }
  std::size_t nodes_working() const { return working_; }
  // The job's fan-out, once run() began, when the job has one (more than nodes.fanout_min nodes).
  const job_fanout* fanout() const { return fanout_ ? &*fanout_ : nullptr; }

 private:
  boost::asio::awaitable<void> pack_step(diagnostics& diag);
  // The node program's options for this node: on a team pool's node, its tenant's user.
  materialise_options options_for(const ready_node& node) const;
  // On a team pool's node, the command runs as the tenant's own user (env.runner).
  void as_tenant(const ready_node& node, environment& env) const;
  // `asked`: when the job asked for the node (its start, or an add_nodes call).
  boost::asio::awaitable<void> on_node(ready_node& node, std::chrono::steady_clock::time_point asked);
  // The node's steps (its layers, then the work), beside its fan-out server when it has children.
  boost::asio::awaitable<void> steps_and_serve(ready_node& node);
  boost::asio::awaitable<void> steps_then_flag(ready_node& node, const fanout_role* fan, bool& over);
  boost::asio::awaitable<void> node_steps(ready_node& node, const fanout_role* fan);
  boost::asio::awaitable<void> on_node_lazily(ready_node& node, const fanout_role* fan);
  boost::asio::awaitable<void> materialise_beside(ready_node& node, lazy_link& link, const fanout_role* fan,
                                                  diagnostics& diag, std::optional<result<environment>>& out);
  boost::asio::awaitable<void> work_when_ready(ready_node& node, lazy_link& link);
  void began_work(const std::string& node, std::chrono::steady_clock::time_point begin);
  // The node's steps, which work_over() stops while the node's work has not begun.
  boost::asio::awaitable<void> steps_until_work_over(ready_node& node);
  // On a pool's node: the lease's file put on the node, and env's commands made to run under the lease;
  // false (a failure said) when the file could not be written: the node gets no work.
  boost::asio::awaitable<bool> under_lease(ready_node& node, environment& env);
  // The node's interpreter fits the packed environment (check_python); false: the node gets no work.
  boost::asio::awaitable<bool> python_fits(ready_node& node, const environment& env);
  // The order the nodes' commands imported layers in, merged with the stored one, stored when it changed.
  boost::asio::awaitable<void> store_import_order();
  void hurry(const std::vector<std::string>& ids);
  boost::asio::awaitable<void> provide(std::size_t count);
  // The two as items of one fan-out: the pack's failure cancels the provisioning beside it.
  boost::asio::awaitable<result<void>> pack_or_fail();
  boost::asio::awaitable<result<void>> provide_all(std::size_t count);

  const command_context& ctx_;
  tracing::action& act_;
  std::chrono::steady_clock::time_point start_;
  std::optional<net::s3_session> storage_;
  std::optional<node_access> access_;
  std::unique_ptr<provision::provider> provider_;
  std::unique_ptr<node_pool> pool_;
  layer_feed feed_;  // the layers as they reach storage, for every node at once
  std::optional<job_fanout> fanout_;  // jobs of more than nodes.fanout_min nodes
  std::optional<pack_outcome> packed_;
  std::optional<std::chrono::steady_clock::time_point> packed_at_;
  error_code pack_error_;
  diagnostics pack_diag_;
  materialise_options materialise_;
  job_work work_;
  std::vector<std::string> failures_;
  startup_times times_;
  std::size_t working_ = 0;  // nodes whose work has begun
  bool lazy_ = false;
  std::string python_;                                  // check_python's program; empty: no check
  std::optional<packaging::python_info> local_python_;  // known once the scan is done
  std::vector<std::string> compiled_;                   // shipped distributions with compiled modules
  bool python_warned_ = false;
  bool work_over_ = false;
  std::map<std::string, boost::asio::cancellation_signal*> not_working_;  // node -> stops its steps
  std::map<std::string, std::chrono::steady_clock::time_point> asked_;    // new node -> when it was asked for
  std::optional<double> new_node_seconds_;
  packaging::pack_progress* progress_ = nullptr;  // while the pack runs: hurry() reaches it
  std::map<std::string, std::size_t> layer_index_;  // layer id -> its index in the scan
  std::vector<std::vector<std::string>> imported_;  // each node's imports, first imported first
};

}  // namespace ferry::agent
