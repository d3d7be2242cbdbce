// `ferry cluster up|ls|down|run`: a Dask cluster on ferry's nodes, from the project's own environment, for
// maps that outgrow `ferry map` (agent/cluster/dask_holder.hpp holds each one). `up` starts the holder
// detached (it outlives the command) and waits until the cluster is ready or failed; a second `up` of the
// same name finds it and reuses it. `run` does the same, then runs a program on the workstation with
// DASK_SCHEDULER_ADDRESS set (so `distributed.Client()` connects) and exits with its code. `down` tells the
// holder to stop (SIGTERM) and waits for it: it stops the scheduler and the workers, and its forwarding.
// `hold` is the holder itself; users do not call it.
#include "agent/commands/command.hpp"

#include "agent/cli/report.hpp"
#include "agent/cluster/cluster_record.hpp"
#include "agent/cluster/dask_holder.hpp"
#include "agent/error.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/provide/node_access.hpp"
#include "agent/provide/node_end.hpp"
#include "agent/cli/plural.hpp"
#include "net/cancellation.hpp"
#include "net/child_process.hpp"
#include "net/ssh_quote.hpp"
#include "provision/file_lock.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <csignal>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>

extern char** environ;

namespace ferry::agent {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace at = action_types::cluster;
using clock = std::chrono::steady_clock;

struct cluster_args {
  std::string name = "dask";
  std::string engine = "dask";
  int nodes = 0;  // 0: nodes.count
  bool all = false;
  bool down_after = false;
  std::vector<std::string> names;
};

fs::path dir_of(const command_context& ctx) { return clusters_dir(ctx.config.values.dirs.state); }

std::size_t node_count(const command_context& ctx, const cluster_args& args) {
  return static_cast<std::size_t>(std::max(1, args.nodes > 0 ? args.nodes : ctx.config.values.nodes.count));
}

// Waits `d` (a poll's pause); a cancelled wait just ends early.
asio::awaitable<void> pause(asio::steady_timer& timer, std::chrono::milliseconds d) {
  timer.expires_after(d);
  error_code ignored;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

// How long a holder may take to wind down after SIGTERM: its grace for the remote processes, twice over.
clock::duration stop_limit(const command_context& ctx) {
  const auto& v = ctx.config.values;
  return 2 * (v.agent.shutdown_grace + v.ssh.kill_grace + v.ssh.connect_timeout) + std::chrono::seconds(5);
}

// Stops a holder: SIGTERM, then SIGKILL when it does not end in time. False when it had to be killed.
asio::awaitable<bool> stop_holder(const command_context& ctx, const cluster_record& r) {
  if (!holder_alive(r)) co_return true;
  ::kill(r.pid, SIGTERM);
  asio::steady_timer timer(ctx.io);
  const auto deadline = clock::now() + stop_limit(ctx);
  while (holder_alive(r) && clock::now() < deadline) co_await pause(timer, std::chrono::milliseconds(50));
  if (!holder_alive(r)) co_return true;
  ::kill(r.pid, SIGKILL);
  co_return false;
}

// The holder's command line: this binary, the same configuration file, a trace file of its own beside
// this command's when it names one.
std::vector<std::string> holder_argv(const command_context& ctx, const cluster_args& args, std::size_t nodes) {
  std::error_code ec;
  const auto self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> argv{ec ? std::string("ferry") : self.string()};
  if (!ctx.options.config_file.empty()) argv.insert(argv.end(), {"--config", ctx.options.config_file});
  if (!ctx.options.trace_file.empty()) {
    fs::path t(ctx.options.trace_file);
    argv.insert(argv.end(), {"--trace", (t.parent_path() / (t.stem().string() + ".cluster-" + args.name + ".jsonl")).string()});
  }
  argv.insert(argv.end(), {"cluster", "hold", "--name", args.name, "--nodes", std::to_string(nodes), "--provider",
                           ctx.config.values.nodes.provider});
  return argv;
}

// Starts the holder detached (its own session, adopted by init when the shell around it exits), its
// output appended to `log`; returns its pid.
asio::awaitable<result<int>> launch_holder(const command_context& ctx, tracing::action& act,
                                           const std::vector<std::string>& holder, const fs::path& log,
                                           diagnostics& diag) {
  net::child_request request;
  request.argv = {"/bin/sh", "-c", R"(log=$1; shift; setsid "$0" "$@" </dev/null >>"$log" 2>&1 & echo $!)",
                  holder.front(), log.string()};
  request.argv.insert(request.argv.end(), holder.begin() + 1, holder.end());
  request.timeout = ctx.config.values.nodes.local_command_timeout;
  request.after_exit = net::leftovers::keep;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (!std::string_view(*e).starts_with("FERRY_TASK_ID=")) env.emplace_back(*e);
  env.push_back("FERRY_TASK_ID=" + act.serialize_task_id());
  request.environment = std::move(env);
  auto ran = co_await net::run_child(request, diag);
  if (!ran) co_return ran.error();
  int pid = 0;
  const auto& out = ran->out;
  std::from_chars(out.data(), out.data() + out.size(), pid);
  if (pid <= 0) {
    diag.set(fmt::format("starting the cluster's holder printed no pid: {}", ran->err));
    co_return make_error_code(errc::cluster_failed);
  }
  co_return pid;
}

std::string log_tail(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr std::size_t shown = 2000;
  return text.size() > shown ? "..." + text.substr(text.size() - shown) : text;
}

// Waits until the holder says ready or failed, or is gone. A Ctrl-C meanwhile stops it.
asio::awaitable<result<cluster_record>> await_ready(const command_context& ctx, const cluster_args& args,
                                                    const cluster_record& launched, diagnostics& diag) {
  const auto& v = ctx.config.values;
  const auto deadline = clock::now() + v.nodes.ready_timeout + v.agent.cluster_start_timeout + std::chrono::seconds(30);
  const auto dir = dir_of(ctx);
  asio::steady_timer timer(ctx.io);
  for (;;) {
    diagnostics d;
    auto r = read_record(dir, args.name, d);
    if (r && *r && (*r)->pid == launched.pid) {
      if ((*r)->status == "ready") co_return std::move(**r);
      if ((*r)->status == "failed") {
        diag.set(fmt::format("cluster {}: {}", args.name, (*r)->error));
        // It is winding down: its remote processes are stopped before this says it failed.
        const auto limit = clock::now() + stop_limit(ctx);
        while (holder_alive(launched) && clock::now() < limit) co_await pause(timer, std::chrono::milliseconds(50));
        remove_record(dir, args.name, launched.pid);
        co_return make_error_code(errc::cluster_failed);
      }
    }
    if (!holder_alive(launched)) {
      diag.set(fmt::format("cluster {}: its holder ended before the cluster was ready; its log ({}):\n{}", args.name,
                           launched.log, log_tail(launched.log)));
      remove_record(dir, args.name, launched.pid);
      co_return make_error_code(errc::cluster_failed);
    }
    if (clock::now() >= deadline) {
      co_await stop_holder(ctx, launched);
      diag.set(fmt::format("cluster {}: not ready in time; its log ({}):\n{}", args.name, launched.log,
                           log_tail(launched.log)));
      co_return make_error_code(errc::cluster_failed);
    }
    co_await pause(timer, std::chrono::milliseconds(50));
    if (co_await net::cancelled()) {
      co_await asio::this_coro::reset_cancellation_state();
      co_await stop_holder(ctx, launched);
      co_return asio::error::operation_aborted;
    }
  }
}

// The cluster of that name, ready: the one that runs, or a new one. `reused` says which.
asio::awaitable<result<cluster_record>> bring_up(const command_context& ctx, tracing::action& act,
                                                 const cluster_args& args, bool& reused, diagnostics& diag) {
  if (!valid_cluster_name(args.name)) {
    diag.set(fmt::format("--name {}: use letters, digits, '-', '_' and '.' (at most 64)", args.name));
    co_return make_error_code(errc::cluster_failed);
  }
  if (args.engine != "dask") {
    diag.set(fmt::format("--engine {}: ferry runs dask clusters", args.engine));
    co_return make_error_code(errc::cluster_failed);
  }
  const auto dir = dir_of(ctx);
  cluster_record launched;
  {
    // One `up` at a time decides whether to start a holder; the next sees its record.
    auto lock = co_await provision::lock_file(dir / ".lock", ctx.config.values.nodes.registry_lock_timeout, diag);
    if (!lock) co_return lock.error();
    auto existing = read_record(dir, args.name, diag);
    if (!existing) co_return existing.error();
    // One that is going away is waited for, then replaced by a new one.
    if (*existing && holder_alive(**existing) && ((*existing)->status == "stopping" || (*existing)->status == "stopped")) {
      if (!co_await stop_holder(ctx, **existing)) {
        diag.set(fmt::format("cluster {}: the holder that was stopping (pid {}) had to be killed", args.name,
                             (*existing)->pid));
        co_return make_error_code(errc::cluster_failed);
      }
      *existing = std::nullopt;
    }
    if (*existing && holder_alive(**existing) && (*existing)->status != "failed") {
      launched = std::move(**existing);
      reused = launched.status == "ready";
      if (reused) co_return launched;
    } else {
      if (*existing) remove_record(dir, args.name, (*existing)->pid);
      const auto nodes = node_count(ctx, args);
      launched.name = args.name;
      launched.status = "starting";
      launched.wanted = nodes;
      launched.log = (dir / (args.name + ".log")).string();
      fs::create_directories(dir);
      std::error_code ec;
      fs::remove(launched.log, ec);
      auto pid = co_await launch_holder(ctx, act, holder_argv(ctx, args, nodes), launched.log, diag);
      if (!pid) co_return pid.error();
      launched.pid = *pid;
      launched.pid_start = process_start(*pid);
      launched.started_at = static_cast<std::int64_t>(std::time(nullptr));
      // Written here too, under the lock: until the holder writes its own, the next `up` must see this one.
      auto read_again = read_record(dir, args.name, diag);
      if (read_again && !*read_again) {
        if (auto w = write_record(dir, launched, diag); !w) co_return w.error();
      }
    }
  }
  co_return co_await await_ready(ctx, args, launched, diag);
}

void print_ready(const cluster_record& r, bool reused) {
  fmt::print("cluster {}: {} {}\n", r.name, counted(r.nodes.size(), "worker"),
             reused ? "(reused)" : "ready");
  fmt::print("  scheduler: {}\n  dashboard: {}\n", r.scheduler, r.dashboard.empty() ? "(none)" : r.dashboard);
}

asio::awaitable<int> up(command_context& ctx, const cluster_args& args) {
  auto& act = ctx.trace;
  diagnostics diag;
  bool reused = false;
  auto r = co_await bring_up(ctx, act, args, reused, diag);
  if (!r) co_return report(act, r.error(), diag);
  print_ready(*r, reused);
  act.succeed({{"name", r->name}, {"reused", reused}, {"scheduler", r->scheduler}, {"workers", r->nodes.size()}});
  co_return exit_code::success;
}

asio::awaitable<int> ls(command_context& ctx, const cluster_args&) {
  auto& act = ctx.trace;
  const auto records = list_records(dir_of(ctx));
  if (records.empty()) {
    fmt::print("no clusters\n");
    act.succeed({{"clusters", 0}});
    co_return exit_code::success;
  }
  fmt::print("{:<16} {:<9} {:>7}  {:<24} {}\n", "NAME", "STATUS", "WORKERS", "SCHEDULER", "DASHBOARD");
  for (const auto& r : records) {
    const auto status = holder_alive(r) ? r.status : std::string("gone");
    fmt::print("{:<16} {:<9} {:>3}/{:<3}  {:<24} {}\n", r.name, status, r.nodes.size(), r.wanted, r.scheduler,
               r.dashboard);
  }
  act.succeed({{"clusters", records.size()}});
  co_return exit_code::success;
}

// Ends the nodes made for the cluster that are still in the registry; those it took warm stay warm.
asio::awaitable<result<void>> end_created_nodes(command_context& ctx, tracing::action& act, const cluster_record& r,
                                                diagnostics& diag) {
  if (r.created.empty()) co_return result<void>{};
  auto access = open_node_access(ctx, diag);
  if (!access) co_return access.error();
  auto nodes = access->registry.load(diag);
  if (!nodes) co_return nodes.error();
  error_code first;
  for (const auto& n : *nodes) {
    if (std::find(r.created.begin(), r.created.end(), n.id) == r.created.end()) continue;
    diagnostics d;
    auto provider = provider_named(ctx, *access, n.provider, d);
    result<void> ended = provider.has_error() ? result<void>(provider.error()) : result<void>{};
    if (provider) ended = co_await end_node(act, **provider, access->registry, n, d);  // not in a ?: (GCC 12)
    if (ended) {
      fmt::print("ended {} ({})\n", n.id, n.name);
    } else if (!first) {
      first = ended.error();
      diag = std::move(d);
    }
  }
  if (first) co_return first;
  co_return result<void>{};
}

// Stops the holder (and with it the scheduler, the workers and the forwarding), forgets the cluster, and
// ends the nodes made for it. False when something could not be ended cleanly (said on stderr).
asio::awaitable<bool> end_cluster(command_context& ctx, tracing::action& act, const cluster_record& r) {
  auto step = act.child(at::down, {{"name", r.name}, {"pid", r.pid}});
  const bool clean = co_await stop_holder(ctx, r);
  // The holder's last word: it names every node it made, those of a replacement still under way too.
  diagnostics ignored;
  auto last = read_record(dir_of(ctx), r.name, ignored);
  const bool has_last = last && *last && (*last)->pid == r.pid;
  const cluster_record& final_record = has_last ? **last : r;
  remove_record(dir_of(ctx), r.name, r.pid);
  if (!clean)
    fmt::print(stderr, "ferry: cluster {}: its holder did not stop in time and was killed; its remote processes "
               "end with their nodes\n", r.name);
  diagnostics d;
  auto ended = co_await end_created_nodes(ctx, step, final_record, d);
  if (!ended)
    fmt::print(stderr, "ferry: cluster {}: its nodes could not all be ended: {}\n", r.name, describe(ended.error(), d));
  if (clean && ended) {
    step.succeed();
    co_return true;
  }
  step.fail_exception(clean ? "nodes" : "killed", clean ? describe(ended.error(), d) : "the holder did not stop in time");
  co_return false;
}

asio::awaitable<int> down(command_context& ctx, const cluster_args& args) {
  auto& act = ctx.trace;
  diagnostics diag;
  if (!args.all && args.names.empty()) {
    diag.set("name the clusters to end (see `ferry cluster ls`), or pass --all");
    co_return report(act, errc::no_such_cluster, diag);
  }
  const auto dir = dir_of(ctx);
  auto records = list_records(dir);
  for (const auto& name : args.names) {
    if (std::none_of(records.begin(), records.end(), [&](const auto& r) { return r.name == name; })) {
      diag.set(fmt::format("no cluster {} (see `ferry cluster ls`)", name));
      co_return report(act, errc::no_such_cluster, diag);
    }
  }
  int ended = 0;
  bool all_clean = true;
  for (const auto& r : records) {
    if (!args.all && std::find(args.names.begin(), args.names.end(), r.name) == args.names.end()) continue;
    if (!co_await end_cluster(ctx, act, r)) all_clean = false;
    fmt::print("ended cluster {}\n", r.name);
    ++ended;
  }
  act.succeed({{"ended", ended}});
  co_return all_clean ? exit_code::success : exit_code::failure;
}

// `cluster run`: the user's program on this machine, with the scheduler's address in its environment.
asio::awaitable<int> run(command_context& ctx, const cluster_args& args) {
  auto& act = ctx.trace;
  const auto& command = ctx.options.command;
  if (command.empty()) {
    print_error("give the program to run after --, e.g. ferry cluster run -- python client.py");
    co_return exit_code::usage;
  }
  diagnostics diag;
  bool reused = false;
  auto r = co_await bring_up(ctx, act, args, reused, diag);
  if (!r) co_return report(act, r.error(), diag);
  if (ctx.options.verbosity >= 0)
    fmt::print(stderr, "ferry: cluster {}: {} {}, scheduler {}, dashboard {}\n", r->name, counted(r->nodes.size(), "worker"),
               reused ? "(reused)" : "ready", r->scheduler, r->dashboard);
  auto client = act.child(at::client, {{"command", net::quote_argv(command)}});
  net::child_request request;
  request.argv = command;
  request.inherit_stdio = true;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view v(*e);
    if (!v.starts_with("DASK_SCHEDULER_ADDRESS=") && !v.starts_with("FERRY_TASK_ID=")) env.emplace_back(v);
  }
  env.push_back("DASK_SCHEDULER_ADDRESS=" + r->scheduler);
  env.push_back("FERRY_TASK_ID=" + client.hand_off_task_id());
  request.environment = std::move(env);
  auto done = co_await net::run_child(request, diag);
  int code = exit_code::failure;
  if (!done) {
    client.fail(done.error(), diag);
    if (done.error() == asio::error::operation_aborted) code = exit_code::interrupted;
    else print_error(describe(done.error(), diag));
  } else {
    code = done->exit_code;
    if (code == 0) client.succeed({{"exit_code", 0}});
    else client.fail_exception("exit", fmt::format("exit code {}", code));
  }
  if (args.down_after) {
    co_await asio::this_coro::reset_cancellation_state();
    // The cluster's record as it is now: the holder added the nodes it made since.
    diagnostics d;
    auto now = read_record(dir_of(ctx), r->name, d);
    const auto& current = now && *now ? **now : *r;
    if (!co_await end_cluster(ctx, act, current) && code == 0) code = exit_code::failure;
  }
  co_return code;
}

asio::awaitable<int> hold(command_context& ctx, const cluster_args& args) {
  hold_options o;
  o.name = args.name;
  o.nodes = node_count(ctx, args);
  o.dir = dir_of(ctx);
  o.log = (o.dir / (args.name + ".log")).string();
  if (!valid_cluster_name(o.name)) {
    diagnostics diag;
    diag.set(fmt::format("--name {}: not a cluster name", o.name));
    co_return report(ctx.trace, errc::cluster_failed, diag);
  }
  co_return co_await hold_dask_cluster(ctx, o);
}

}  // namespace

void add_cluster_commands(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<cluster_args>();
  auto provider = std::make_shared<std::string>();
  auto* cluster = app.add_subcommand("cluster", "a Dask cluster on ferry's nodes, with the project's environment");
  cluster->require_subcommand(1);
  auto common = [&](CLI::App* cmd) {
    cmd->add_option("--name", args->name, "the cluster's name (default dask)");
    cmd->add_option("--nodes", args->nodes, "how many nodes, a worker on each (nodes.count)")
        ->check(CLI::Range(1, config::max_node_count));
    cmd->add_option("--provider", *provider, "local, ssh or ec2 (nodes.provider)");
  };
  auto with_provider = [&selected, provider] {
    if (!provider->empty()) selected.config_flags.push_back({"nodes.provider", *provider, "--provider"});
  };

  auto* up_cmd = cluster->add_subcommand("up", "ship the project and start a scheduler and a worker per node");
  common(up_cmd);
  up_cmd->add_option("--engine", args->engine, "dask (the only one)");
  up_cmd->callback([&selected, args, with_provider] {
    with_provider();
    selected.action_type = at::up;
    selected.run = [args](command_context& ctx) { return up(ctx, *args); };
  });

  auto* ls_cmd = cluster->add_subcommand("ls", "list the clusters, with their addresses on this machine");
  ls_cmd->callback([&selected, args] {
    selected.action_type = at::ls;
    selected.run = [args](command_context& ctx) { return ls(ctx, *args); };
  });

  auto* down_cmd = cluster->add_subcommand("down", "end clusters: their scheduler, workers and forwarding");
  down_cmd->add_option("names", args->names, "cluster names");
  down_cmd->add_flag("--all", args->all, "every cluster");
  down_cmd->callback([&selected, args] {
    selected.action_type = at::down;
    selected.run = [args](command_context& ctx) { return down(ctx, *args); };
  });

  auto* run_cmd = cluster->add_subcommand("run", "bring a cluster up (or reuse it) and run a program here against it");
  common(run_cmd);
  run_cmd->add_flag("--down", args->down_after, "end the cluster when the program ends");
  run_cmd->footer("  ferry cluster run [--nodes N] [--name NAME] [--down] -- python3 client.py");
  run_cmd->callback([&selected, args, with_provider] {
    with_provider();
    selected.action_type = at::run;
    selected.takes_command = true;
    selected.run = [args](command_context& ctx) { return run(ctx, *args); };
  });

  auto* hold_cmd = cluster->add_subcommand("hold", "(internal) hold a cluster: what `cluster up` starts");
  common(hold_cmd);
  hold_cmd->group("");  // not listed in --help
  hold_cmd->callback([&selected, args, with_provider] {
    with_provider();
    selected.action_type = at::hold;
    selected.run = [args](command_context& ctx) { return hold(ctx, *args); };
  });
}

}  // namespace ferry::agent
