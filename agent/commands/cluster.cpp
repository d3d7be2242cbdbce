// `ferry cluster up|ls|down|run`: a Dask cluster on ferry's nodes, from the project's own environment, for
// maps that outgrow `ferry map` (agent/cluster/dask_holder.hpp holds each one). `up` starts the holder
// detached (it outlives the command: agent/cluster/holder_process.hpp) and waits until the cluster is ready
// or failed; a second `up` of the same name finds it and reuses it. `run` does the same, then runs a program
// on the workstation with DASK_SCHEDULER_ADDRESS set (so `distributed.Client()` connects) and exits with its
// code. `down` tells the holder to stop (SIGTERM) and waits for it: it stops the scheduler and the workers,
// and its forwarding. `hold` is the holder itself; users do not call it.
#include "agent/commands/command.hpp"

#include "agent/cli/report.hpp"
#include "agent/cluster/cluster_record.hpp"
#include "agent/cluster/dask_holder.hpp"
#include "agent/cluster/holder_process.hpp"
#include "agent/error.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/provide/node_access.hpp"
#include "agent/provide/node_end.hpp"
#include "agent/cli/plural.hpp"
#include "net/child_process.hpp"
#include "net/shell_quote.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/this_coro.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

extern char** environ;

namespace ferry::agent {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace at = action_types::cluster;

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

cluster_wanted wanted_of(const command_context& ctx, const cluster_args& args) {
  return {.name = args.name, .engine = args.engine, .nodes = node_count(ctx, args)};
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
  auto r = co_await bring_up_cluster(ctx, act, wanted_of(ctx, args), reused, diag);
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
    auto ended = co_await end_node_by_its_provider(act, ctx, *access, n, d);
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
  const auto stopped = co_await stop_cluster_holder(ctx, r);
  const bool clean = stopped.clean;
  if (!clean)
    fmt::print(stderr, "ferry: cluster {}: its holder did not stop in time and was killed; its remote processes "
               "end with their nodes\n", r.name);
  diagnostics d;
  auto ended = co_await end_created_nodes(ctx, step, stopped.last, d);
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
  auto r = co_await bring_up_cluster(ctx, act, wanted_of(ctx, args), reused, diag);
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
