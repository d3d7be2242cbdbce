#include "agent/cluster/dask_holder.hpp"

#include "agent/cli/report.hpp"
#include "agent/cluster/cluster_record.hpp"
#include "agent/cluster/dask_log.hpp"
#include "agent/error.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/job/job.hpp"
#include "agent/run/node_output.hpp"
#include "agent/provide/node_watchdog.hpp"
#include "agent/run/task_command.hpp"
#include "net/async_event.hpp"
#include "net/cancellation.hpp"
#include "net/deadline.hpp"
#include "net/node_link.hpp"
#include "net/run_all.hpp"
#include "net/task_group.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/ip/address.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;
namespace at = action_types::cluster;
using tcp = asio::ip::tcp;
using clock = std::chrono::steady_clock;

bool is_ip(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// A change anyone may wait for: each notify() wakes every waiter that took the event before it.
class change_signal {
 public:
  explicit change_signal(asio::any_io_executor io) : io_(io), event_(std::make_shared<net::async_event>(io)) {}
  void notify() {
    auto fired = std::exchange(event_, std::make_shared<net::async_event>(io_));
    fired->set();
  }
  // Take it before looking at the state, then wait for it: a change in between is not missed.
  std::shared_ptr<net::async_event> next() const { return event_; }

 private:
  asio::any_io_executor io_;
  std::shared_ptr<net::async_event> event_;
};

// Waits for `ev` until `deadline`; false when the deadline came first (or the caller was cancelled).
asio::awaitable<bool> wait_for(std::shared_ptr<net::async_event> ev, clock::time_point deadline) {
  auto waited = co_await net::with_deadline(ev->wait(), deadline);
  co_return waited && !*waited;
}

struct holder_state {
  explicit holder_state(asio::any_io_executor io) : changes(io) {}

  change_signal changes;
  bool scheduler_claimed = false;
  std::string scheduler_node;
  std::shared_ptr<net::node_link> scheduler_link;
  std::optional<dask_address> scheduler;  // as the nodes reach it
  std::optional<dask_address> dashboard;
  std::optional<std::string> scheduler_ended;  // why
  std::set<std::string> workers;               // nodes whose worker registered and still runs
  std::set<std::string> created;               // nodes made for the cluster, not taken warm
  std::size_t lost = 0;                        // workers lost and not yet replaced
  std::string last_lost;                       // why the last one went
  std::size_t clients = 0;
  bool job_over = false;
  bool stopping = false;
};

// A Dask process's output: into its log reader, and on to this process's own output (the holder's log
// file) with the node's name in front of each line.
class dask_output final : public net::output_sink {
 public:
  dask_output(std::string prefix, std::function<void(const dask_log&)> on_change)
      : echo_(std::move(prefix)), on_change_(std::move(on_change)) {}

  asio::awaitable<error_code> write(net::output_stream stream, std::span<const char> bytes) override {
    log_.feed(std::string_view(bytes.data(), bytes.size()));
    if (log_.changes() != seen_) {
      seen_ = log_.changes();
      on_change_(log_);
    }
    co_return co_await echo_.write(stream, bytes);
  }
  const dask_log& log() const { return log_; }

 private:
  dask_log log_;
  node_output echo_;
  std::function<void(const dask_log&)> on_change_;
  std::uint64_t seen_ = 0;
};

// The address a node's SSH connection arrived on (SSH_CONNECTION's third field): the node's own address on
// the network ferry reaches it by (the private one behind a NAT), whatever name the node goes by. The Dask
// processes listen there only. Empty when the node will not say: they then listen on every address.
asio::awaitable<std::string> own_address(tracing::action& act, job_node& jn) {
  diagnostics diag;
  auto said = co_await net::run_command(act, *jn.ready.link, "echo $SSH_CONNECTION", diag);
  if (said && said->exit.success()) {
    std::istringstream fields(said->out);
    std::string client, client_port, server;
    if (fields >> client >> client_port >> server && is_ip(server)) co_return server;
  }
  co_return is_ip(jn.ready.node.host) ? jn.ready.node.host : std::string();
}

std::vector<std::string> scheduler_argv(const std::string& bind) {
  std::vector<std::string> argv{"python3", "-m", "distributed.cli.dask_scheduler", "--port", "0",
                                "--dashboard-address", bind + ":0"};
  if (!bind.empty()) argv.insert(argv.end(), {"--host", bind});
  return argv;
}

std::vector<std::string> worker_argv(const provision::node& n, const dask_address& scheduler, const std::string& bind) {
  std::vector<std::string> argv{"python3", "-m", "distributed.cli.dask_worker",
                                fmt::format("tcp://{}:{}", scheduler.host, scheduler.port),
                                "--name", n.id, "--nworkers", "1", "--no-dashboard"};
  if (!bind.empty()) argv.insert(argv.end(), {"--host", bind});
  return argv;
}

// One Dask process on a node, as a command of the shipped environment, until it ends.
asio::awaitable<result<net::exit_info>> run_dask(tracing::action& task, job_node& jn,
                                                 const std::vector<std::string>& argv, dask_output& out,
                                                 diagnostics& diag) {
  auto line = task_command(jn.env, task.hand_off_task_id(), {}, argv);
  net::exec_request request;
  request.command = command_for(jn.ready.node, line.command);
  net::buffer_source input(line.input);
  if (!line.input.empty()) request.input = &input;
  request.output = &out;
  co_return co_await jn.ready.link->exec(task, request, diag);
}

std::string ended_because(const result<net::exit_info>& done, const diagnostics& diag, const dask_log& log) {
  auto why = done ? fmt::format("it exited ({})", done->describe()) : describe(done.error(), diag);
  const auto tail = log.tail();
  return tail.empty() ? why : fmt::format("{}; its last lines:\n{}", why, tail);
}

asio::awaitable<void> run_scheduler(tracing::action& act, job_node& jn, holder_state& st, std::string bind) {
  co_await net::accept_cancellation();
  const auto& n = jn.ready.node;
  auto task = act.child(at::scheduler, {{"node", n.id}});
  // An address Dask printed as every address of its node is reached at the one it was told to listen on.
  const auto reachable = [&](dask_address a) {
    if (a.host.empty() || a.host == "0.0.0.0") a.host = bind.empty() ? n.host : bind;
    return a;
  };
  dask_output out(n.name + " scheduler | ", [&](const dask_log& log) {
    st.clients = log.clients();
    if (!st.scheduler && log.scheduler()) {
      const auto where = reachable(*log.scheduler());
      st.scheduler = where;
      st.scheduler_node = n.id;
      st.scheduler_link = jn.ready.link;
      task.log(at::scheduler_at, {{"address", fmt::format("tcp://{}:{}", where.host, where.port)}});
    }
    if (!st.dashboard && log.dashboard()) st.dashboard = reachable(*log.dashboard());
    st.changes.notify();
  });
  diagnostics diag;
  auto done = co_await run_dask(task, jn, scheduler_argv(bind), out, diag);
  if (!st.stopping) st.scheduler_ended = fmt::format("the scheduler on {} ended: {}", n.name, ended_because(done, diag, out.log()));
  st.changes.notify();
  if (!done) {
    task.fail(done.error(), diag);
  } else {
    task.fail_exception("exit", fmt::format("the scheduler ended ({})", done->describe()));
  }
}

asio::awaitable<void> run_worker(tracing::action& act, job_node& jn, holder_state& st, std::string bind) {
  co_await net::accept_cancellation();
  const auto& n = jn.ready.node;
  for (;;) {  // until the scheduler's address is known
    auto next = st.changes.next();
    if (st.scheduler || st.scheduler_ended || st.stopping) break;
    if (co_await next->wait()) co_return;  // cancelled
  }
  if (!st.scheduler) co_return;
  const auto scheduler = *st.scheduler;
  auto task = act.child(at::worker,
                        {{"node", n.id}, {"scheduler", fmt::format("tcp://{}:{}", scheduler.host, scheduler.port)}});
  bool registered = false;
  dask_output out(n.name + " worker | ", [&](const dask_log& log) {
    if (registered || !log.registered()) return;
    registered = true;
    st.workers.insert(n.id);
    task.log(at::registered, {{"node", n.id}});
    st.changes.notify();
  });
  diagnostics diag;
  auto done = co_await run_dask(task, jn, worker_argv(n, scheduler, bind), out, diag);
  st.workers.erase(n.id);
  bool stopped = st.stopping;  // not `a || co_await b`: GCC 12 miscompiles co_await in a short-circuit operand
  if (!stopped) stopped = co_await net::cancelled();
  if (!stopped) {
    ++st.lost;
    st.last_lost = fmt::format("the worker on {} ended: {}", n.name, ended_because(done, diag, out.log()));
    act.log(at::worker_lost, {{"node", n.id}, {"reason", st.last_lost}});
  }
  st.changes.notify();
  if (!done) task.fail(done.error(), diag);
  else if (stopped) task.succeed({{"exit", done->describe()}});
  else task.fail_exception("exit", fmt::format("the worker ended ({})", done->describe()));
}

// A node's part: the first node ready runs the scheduler beside its worker.
asio::awaitable<void> cluster_node(tracing::action& act, job_node& jn, holder_state& st) {
  if (!jn.ready.warm) {
    st.created.insert(jn.ready.node.id);
    st.changes.notify();  // the record names it at once: `cluster down` ends it
  }
  const bool scheduler_here = !st.scheduler_claimed;
  st.scheduler_claimed = true;
  const auto bind = co_await own_address(act, jn);
  if (!scheduler_here) {
    co_await run_worker(act, jn, st, bind);
    co_return;
  }
  std::vector<asio::awaitable<void>> both;
  both.push_back(run_scheduler(act, jn, st, bind));
  both.push_back(run_worker(act, jn, st, bind));
  co_await net::run_all(std::move(both));
}

asio::awaitable<void> run_job(job& j, tracing::action& act, holder_state& st, std::size_t count,
                              result<void>& out, diagnostics& diag) {
  out = co_await j.run(count, [&act, &st](job_node& jn) { return cluster_node(act, jn, st); }, diag);
  st.job_over = true;
  st.changes.notify();
}

// One new node for a lost worker. One that could not be had is lost again: the supervisor tries once more
// while nodes.max_nodes allows.
asio::awaitable<void> replace_worker(job& j, tracing::action& act, holder_state& st) {
  auto step = act.child(at::replace);
  const auto failures = j.failures().size();
  const auto working = j.nodes_working();
  co_await j.add_nodes(1);
  if (j.nodes_working() > working) {
    step.succeed();
    co_return;
  }
  if (!st.stopping) {
    ++st.lost;
    st.changes.notify();
  }
  const auto why = j.failures().size() > failures ? j.failures().back() : std::string("no node came");
  step.fail_exception("no_node", why);
}

// One workstation port, forwarded to `target` on the scheduler's node until cancelled.
asio::awaitable<void> forward_port(tracing::action& act, std::string what, std::shared_ptr<net::node_link> link,
                                   std::shared_ptr<tcp::acceptor> listener, net::forward_target target) {
  auto step = act.child(at::forwarding, {{"what", what},
                                        {"listen", fmt::format("127.0.0.1:{}", listener->local_endpoint().port())},
                                        {"to", fmt::format("{}:{}", target.host, target.port)}});
  co_await link->serve_forwarding(step, *listener, std::move(target));
  step.succeed();
}

result<std::shared_ptr<tcp::acceptor>> listen_locally(asio::any_io_executor io, diagnostics& diag) {
  auto acceptor = std::make_shared<tcp::acceptor>(io);
  boost::system::error_code ec;
  const tcp::endpoint at_loopback(asio::ip::make_address("127.0.0.1"), 0);
  acceptor->open(at_loopback.protocol(), ec);
  if (!ec) acceptor->bind(at_loopback, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    diag.set(fmt::format("cannot listen on 127.0.0.1: {}", ec.message()));
    return ec;
  }
  return acceptor;
}

struct supervisor {
  const command_context& ctx;
  tracing::action& act;
  const hold_options& options;
  job& j;
  holder_state& st;
  net::task_group& work;
  cluster_record& record;
  clock::time_point begin = clock::now();

  error_code fail(errc e, std::string text, diagnostics& diag) {
    diag.set(std::move(text));
    return make_error_code(e);
  }

  // Waits until `ready()` holds, the cluster cannot get there, or `deadline`.
  template <class Ready>
  asio::awaitable<error_code> wait_until(Ready ready, clock::time_point deadline, std::string waiting_for,
                                         const result<void>& job_result, const diagnostics& job_diag,
                                         diagnostics& diag) {
    for (;;) {
      auto next = st.changes.next();
      note_nodes();
      if (st.scheduler_ended) co_return fail(errc::cluster_failed, *st.scheduler_ended, diag);
      if (st.lost > 0) co_return fail(errc::cluster_failed, st.last_lost, diag);
      if (ready()) co_return error_code{};
      if (st.job_over) {
        if (!job_result) {
          diag = job_diag;
          co_return job_result.error();
        }
        co_return fail(errc::cluster_failed, fmt::format("no {}: every node's work ended", waiting_for), diag);
      }
      if (!co_await wait_for(next, deadline)) {
        if (co_await net::cancelled()) co_return asio::error::operation_aborted;
        std::string failures;
        for (const auto& f : j.failures()) failures += "\n  " + f;
        co_return fail(errc::cluster_failed,
                       fmt::format("no {} within {} s (nodes.ready_timeout + agent.cluster_start_timeout){}",
                                   waiting_for,
                                   std::chrono::duration_cast<std::chrono::seconds>(deadline - begin).count(),
                                   failures),
                       diag);
      }
    }
  }

  result<void> forward(std::string what, const dask_address& to, std::string& out, diagnostics& diag) {
    auto listener = listen_locally(ctx.io, diag);
    if (!listener) return listener.error();
    const auto port = (*listener)->local_endpoint().port();
    out = what == "scheduler" ? fmt::format("tcp://127.0.0.1:{}", port) : fmt::format("http://127.0.0.1:{}/status", port);
    work.spawn(forward_port(act, std::move(what), st.scheduler_link, std::move(*listener),
                            net::forward_target{to.host, to.port}));
    return {};
  }

  void note_nodes() {
    std::vector<std::string> now(st.workers.begin(), st.workers.end());
    std::vector<std::string> created(st.created.begin(), st.created.end());
    if (now == record.nodes && created == record.created) return;
    record.nodes = std::move(now);
    record.created = std::move(created);
    diagnostics ignored;
    (void)write_record(options.dir, record, ignored);
  }

  // Ready: replaces lost workers, keeps the record's node list, and ends the cluster when it is idle.
  asio::awaitable<error_code> hold(diagnostics& diag) {
    const auto& nodes = ctx.config.values.nodes;
    const auto idle_timeout = std::chrono::duration_cast<clock::duration>(nodes.idle_timeout);
    const auto max_nodes = static_cast<std::size_t>(std::max(nodes.max_nodes, 0));
    std::size_t started = options.nodes;
    std::optional<clock::time_point> idle_since;
    for (;;) {
      auto next = st.changes.next();
      if (st.scheduler_ended) co_return fail(errc::cluster_failed, *st.scheduler_ended, diag);
      while (st.lost > 0 && (max_nodes == 0 || started < max_nodes)) {
        --st.lost;
        ++started;
        work.spawn(replace_worker(j, act, st));
      }
      note_nodes();
      const auto now = clock::now();
      if (st.clients > 0) idle_since.reset();
      else if (!idle_since) idle_since = now;
      if (idle_timeout > clock::duration::zero() && idle_since && now - *idle_since >= idle_timeout) {
        act.log(at::idle, {{"idle_s", std::chrono::duration<double>(now - *idle_since).count()}});
        co_return error_code{};
      }
      const auto wake = idle_timeout > clock::duration::zero() && idle_since ? *idle_since + idle_timeout
                                                                             : now + std::chrono::hours(1);
      if (co_await wait_for(next, wake)) continue;
      if (co_await net::cancelled()) co_return asio::error::operation_aborted;
    }
  }

  asio::awaitable<error_code> run(const result<void>& job_result, const diagnostics& job_diag, diagnostics& diag) {
    const auto deadline = begin + std::chrono::duration_cast<clock::duration>(ctx.config.values.nodes.ready_timeout +
                                                                               ctx.config.values.agent.cluster_start_timeout);
    auto ec = co_await wait_until([this] { return st.scheduler.has_value(); }, deadline, "scheduler", job_result,
                                  job_diag, diag);
    if (ec) co_return ec;
    if (auto r = forward("scheduler", *st.scheduler, record.scheduler, diag); !r) co_return r.error();
    const auto wanted = options.nodes;
    ec = co_await wait_until([this, wanted] { return st.workers.size() >= wanted; }, deadline,
                             fmt::format("{} registered workers", wanted), job_result, job_diag, diag);
    if (ec) co_return ec;
    // The scheduler said where its dashboard is long before a worker registered, if it has one.
    if (st.dashboard) {
      if (auto r = forward("dashboard", *st.dashboard, record.dashboard, diag); !r) co_return r.error();
    }
    record.status = "ready";
    record.scheduler_node = st.scheduler_node;
    record.nodes.assign(st.workers.begin(), st.workers.end());
    record.created.assign(st.created.begin(), st.created.end());
    if (auto w = write_record(options.dir, record, diag); !w) co_return w.error();
    act.log(at::ready, {{"name", record.name},
                        {"workers", st.workers.size()},
                        {"scheduler", record.scheduler},
                        {"seconds", std::chrono::duration<double>(clock::now() - begin).count()}});
    co_return co_await hold(diag);
  }
};

// The record goes when the holder does, unless it says why the cluster failed (`cluster up` reads that) or
// which nodes were made for it (`cluster down`, which stopped it, reads that).
struct record_guard {
  const hold_options& options;
  cluster_record& record;
  ~record_guard() {
    if (record.status != "failed" && record.status != "stopped") remove_record(options.dir, options.name, record.pid);
  }
};

// Before anything stops: a concurrent `up` must not take a cluster that is going away.
void say_stopping(const hold_options& options, cluster_record& record) {
  record.status = "stopping";
  diagnostics ignored;
  (void)write_record(options.dir, record, ignored);
}

}  // namespace

asio::awaitable<int> hold_dask_cluster(const command_context& ctx, const hold_options& options) {
  auto& act = ctx.trace;
  cluster_record record;
  record.name = options.name;
  record.status = "starting";
  record.pid = static_cast<int>(::getpid());
  record.pid_start = process_start(record.pid);
  record.wanted = options.nodes;
  record.log = options.log;
  record.started_at = static_cast<std::int64_t>(std::time(nullptr));
  record_guard guard{options, record};
  diagnostics diag;
  if (auto w = write_record(options.dir, record, diag); !w) co_return report(act, w.error(), diag);

  job j(ctx, act);
  error_code failed;
  if (auto opened = j.open("", diag); !opened) failed = opened.error();
  holder_state st(ctx.io);
  net::task_group work(ctx.io);
  result<void> job_result;
  diagnostics job_diag;
  if (!failed) {
    work.spawn(run_job(j, act, st, options.nodes, job_result, job_diag));
    supervisor s{ctx, act, options, j, st, work, record};
    failed = co_await s.run(job_result, job_diag, diag);
  }
  st.stopping = true;
  say_stopping(options, record);
  work.cancel();
  co_await work.wait();
  record.created.assign(st.created.begin(), st.created.end());
  diagnostics ignored;
  if (!failed) {  // idle: the nodes go back to the warm pool
    act.succeed();
    co_return exit_code::success;
  }
  if (failed == asio::error::operation_aborted) {  // `cluster down`: it ends the nodes made for the cluster
    record.status = "stopped";
    (void)write_record(options.dir, record, ignored);
  } else {
    record.status = "failed";
    record.error = describe(failed, diag);
    (void)write_record(options.dir, record, ignored);
  }
  co_return report(act, failed, diag);
}

}  // namespace ferry::agent
