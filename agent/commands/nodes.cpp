// `ferry nodes up N | ls | down`: nodes from the configured provider, waited for until they run a
// command over SSH, recorded in the registry so that later commands reuse them, listed with their state,
// age and idle time, and ended.
#include "agent/commands/command.hpp"

#include "agent/cli/report.hpp"
#include "agent/error.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/provide/node_access.hpp"
#include "agent/provide/node_end.hpp"
#include "agent/provide/node_watchdog.hpp"
#include "agent/cli/plural.hpp"
#include "agent/provide/warm_nodes.hpp"
#include "config/units.hpp"
#include "net/cancellation.hpp"
#include "net/run_all.hpp"
#include "provision/error.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <set>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;

struct nodes_args {
  int count = 1;
  std::vector<std::string> names;
  bool all = false;
};

std::int64_t now_seconds() { return static_cast<std::int64_t>(std::time(nullptr)); }

// "42s", "7m", "3h", "2d".
std::string age_text(std::int64_t seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 120) return fmt::format("{}s", seconds);
  if (seconds < 7200) return fmt::format("{}m", seconds / 60);
  if (seconds < 172800) return fmt::format("{}h", seconds / 3600);
  return fmt::format("{}d", seconds / 86400);
}

// A node a provider has that the registry lacks: made by ferry but never recorded, or listed only in a
// registry that was damaged and set aside.
bool unrecorded(const provision::node& n) {
  const auto* v = n.details.if_contains("unrecorded");
  return v && v->is_bool() && v->get_bool();
}

std::string_view state_text(const provision::node& n) {
  return unrecorded(n) ? "unrecorded" : provision::to_string(n.state);
}

void print_table(const std::vector<provision::node>& nodes) {
  fmt::print("{:<22} {:<10} {:<8} {:<22} {:<11} {:>6} {:>6}\n", "ID", "NAME", "PROVIDER", "ADDRESS", "STATE", "AGE",
             "IDLE");
  const auto now = now_seconds();
  for (const auto& n : nodes) {
    const auto used = n.last_used_at ? n.last_used_at : n.created_at;
    fmt::print("{:<22} {:<10} {:<8} {:<22} {:<11} {:>6} {:>6}\n", n.id, n.name, n.provider,
               fmt::format("{}:{}", n.host, n.port), state_text(n), age_text(now - n.created_at),
               age_text(now - used));
  }
}

// One node's watchdog after `nodes up`: installed on a new node, or stopped on one pinned just now.
struct watch_job {
  provision::node node;
  bool pin = false;
  std::string stop_command;  // the provider's; empty when pinning
  error_code error;
  diagnostics diag;
};

asio::awaitable<void> run_watch_job(tracing::action& parent, const node_access& access,
                                    const watchdog_settings& settings, watch_job& job) {
  co_await net::accept_cancellation();
  auto link = co_await connect_node(parent, job.node, access, job.diag);
  if (!link) {
    job.error = link.error();
    co_return;
  }
  result<void> done;
  if (job.pin)
    done = co_await uninstall_watchdog(parent, **link, job.node, settings.paths, settings.program, job.diag);
  else
    done = co_await install_watchdog(parent, **link, job.node, job.stop_command, settings, job.diag);
  (*link)->close();
  if (!done) job.error = done.error();
}

// The registry's running nodes of provider `p`, the new ones (`ready`) as they are and the others with the
// state `p` gives now: a node that stopped itself must not count as warm.
asio::awaitable<result<std::vector<provision::node>>> running_nodes(tracing::action& act, const node_access& access,
                                                                    provision::provider& p,
                                                                    const std::set<std::string>& ready,
                                                                    diagnostics& diag) {
  auto all = access.registry.load(diag);
  if (!all) co_return all.error();
  std::vector<provision::node> out;
  for (auto& n : *all) {
    if (n.provider != p.name() || n.state != provision::node_state::running) continue;
    if (!ready.contains(n.id)) {
      diagnostics d;
      auto now = co_await p.describe(act, n, d);
      if (now) n.state = now->state;
    }
    out.push_back(std::move(n));
  }
  co_return out;
}

// After `nodes up`: the first nodes that make up nodes.min_nodes of this provider are pinned (an older
// node pinned now loses its watchdog), and every other new node gets an idle watchdog that stops it after
// nodes.idle_timeout. The outcome goes into the registry's node details.
asio::awaitable<result<void>> watch_new_nodes(tracing::action& parent, command_context& ctx, node_access& access,
                                              provision::provider& p,
                                              const std::vector<provision::node>& ready, diagnostics& diag) {
  const auto& s = ctx.config.values;
  auto act = parent.child(action_types::nodes::watch,
                          {{"min_nodes", s.nodes.min_nodes}, {"idle_timeout_ms", s.nodes.idle_timeout.count()}});
  const auto settings = watchdog_settings::from(s);
  std::set<std::string> new_ids;
  for (const auto& n : ready) new_ids.insert(n.id);
  auto running = co_await running_nodes(act, access, p, new_ids, diag);
  if (!running) {
    act.fail(running.error(), diag);
    co_return running.error();
  }
  const auto warm = warm_nodes(*running, p.name(), s.nodes.min_nodes);
  std::vector<watch_job> jobs;
  std::vector<provision::node> changed;  // what the registry is to record
  for (auto& n : *running) {
    const bool keep_warm = std::find(warm.begin(), warm.end(), n.id) != warm.end();
    if (keep_warm && !is_pinned(n)) {
      // An older node may have a watchdog (the registry says so): it is asked to stop it.
      const bool ask = has_watchdog(n);
      pin(n);
      note_watchdog(n, nullptr);
      if (ask)
        jobs.push_back({n, true, {}, {}, {}});
      else
        changed.push_back(n);
    } else if (!keep_warm && new_ids.contains(n.id) && settings.enabled()) {
      auto stop = p.self_stop_command(n);
      if (!stop.empty()) jobs.push_back({n, false, std::move(stop), {}, {}});
    }
  }
  std::vector<asio::awaitable<void>> tasks;
  for (auto& job : jobs) tasks.push_back(run_watch_job(act, access, settings, job));
  co_await net::run_all(std::move(tasks));
  std::string failures;
  std::size_t failed = 0;
  for (auto& job : jobs) {
    if (job.error) {
      failures += fmt::format("\n  {}: {}", job.node.id, describe(job.error, job.diag));
      ++failed;
      continue;
    }
    if (!job.pin) note_watchdog(job.node, &settings);
    changed.push_back(job.node);
  }
  const provision::node_registry::change record = [&changed](std::vector<provision::node>& nodes, diagnostics&) {
    for (auto& n : nodes) {
      for (const auto& c : changed) {
        if (c.id == n.id) n.details = c.details;
      }
    }
    return error_code();
  };
  if (auto r = co_await access.registry.modify(act, action_types::registry::watch, record, diag); !r) {
    act.fail(r.error(), diag);
    co_return r.error();
  }
  for (const auto& n : changed) {
    if (is_pinned(n))
      fmt::print("{} ({}) is kept warm (nodes.min_nodes = {})\n", n.name, n.id, s.nodes.min_nodes);
    else
      fmt::print("{} ({}) stops itself after {} idle (nodes.idle_timeout)\n", n.name, n.id,
                 config::format_duration(s.nodes.idle_timeout));
  }
  if (co_await net::cancelled()) {
    act.fail(asio::error::operation_aborted, diag);
    co_return asio::error::operation_aborted;
  }
  if (!failures.empty()) {
    diag.set(fmt::format("the idle watchdog could not be set up (or, on a node kept warm, stopped) on {} of {} "
                         "nodes:{}",
                         failed, jobs.size(), failures));
    act.fail(errc::watchdog_failed, diag);
    co_return errc::watchdog_failed;
  }
  act.succeed({{"pinned", warm.size()}, {"changed", changed.size()}});
  co_return result<void>{};
}

asio::awaitable<int> up(command_context& ctx, const nodes_args& args) {
  auto act = ctx.trace.child(action_types::nodes::up, {{"count", args.count}});
  diagnostics diag;
  auto access = open_node_access(ctx, diag);
  if (!access) co_return report(act, access.error(), diag);
  auto provider = provider_named(ctx, *access, "", diag);
  if (!provider) co_return report(act, provider.error(), diag);
  // No node is made that the registry could not record: it would never be ended.
  std::string notice;
  if (auto usable = co_await access->registry.ensure_usable(act, notice, diag); !usable)
    co_return report(act, usable.error(), diag);
  if (!notice.empty()) fmt::print(stderr, "ferry: warning: {}\n", notice);
  provision::node_spec spec;
  spec.count = args.count;
  auto created = co_await (*provider)->create(act, spec, diag);
  if (!created) co_return report(act, created.error(), diag);
  for (auto& n : *created) {
    if (auto r = co_await access->registry.add(act, n, diag); !r) {
      for (auto& made : *created) {
        diagnostics d;
        if (auto ended = co_await (*provider)->terminate(act, made, d); !ended)
          diag.set(fmt::format("{}\nand {} could not be ended ({}): end it through {}", diag.message, made.id,
                               d.message, made.provider));
      }
      co_return report(act, r.error(), diag);
    }
  }
  const auto login = ssh_login_check(access->ssh);
  auto outcomes = co_await provision::wait_ready_each(act, **provider, *created, login, access->readiness);
  std::vector<provision::node> ready;
  std::string failures;
  for (auto& o : outcomes) {
    if (o.error) {
      failures += fmt::format("\n  {}: {}", o.n.id, describe(o.error, o.diag));
    } else {
      o.n.state = provision::node_state::running;
      ready.push_back(o.n);
    }
    diagnostics d;
    (void)co_await access->registry.add(act, o.n, d);
  }
  print_table(ready);
  if (co_await net::cancelled()) co_return report(act, asio::error::operation_aborted, diag);
  diagnostics watch_diag;
  auto watched = co_await watch_new_nodes(act, ctx, *access, **provider, ready, watch_diag);
  if (!failures.empty()) {
    diag.set(fmt::format("{} of {} not ready (they stay in the registry: `ferry nodes down` ends them):{}{}",
                         outcomes.size() - ready.size(), counted(outcomes.size(), "node is", "nodes are"), failures,
                         watched ? "" : "\nand " + describe(watched.error(), watch_diag)));
    co_return report(act, provision::errc::ssh_not_ready_in_time, diag);
  }
  if (!watched) co_return report(act, watched.error(), watch_diag);
  act.succeed({{"ready", ready.size()}});
  co_return exit_code::success;
}

// The registry's nodes with the state their providers give now (the registry's own when one cannot say).
asio::awaitable<std::vector<provision::node>> refreshed(tracing::action& act, command_context& ctx,
                                                        const node_access& access, std::vector<provision::node> nodes) {
  std::map<std::string, std::unique_ptr<provision::provider>> providers;
  for (auto& n : nodes) {
    if (unrecorded(n)) continue;  // its provider just listed it as it is
    if (!providers.contains(n.provider)) {
      diagnostics d;
      auto p = provider_named(ctx, access, n.provider, d);
      providers.emplace(n.provider, p ? std::move(*p) : nullptr);
    }
    auto& p = providers[n.provider];
    if (!p) continue;
    diagnostics d;
    auto now = co_await p->describe(act, n, d);
    if (now) {
      const auto last_used = n.last_used_at;
      n = std::move(*now);
      n.last_used_at = std::max(n.last_used_at, last_used);
    }
  }
  co_return nodes;
}

// The registry's nodes, then those its providers (the configured one and every one it names) list and it
// lacks, marked unrecorded. A damaged registry is set aside first (ensure_usable), so its nodes show up here.
asio::awaitable<result<std::vector<provision::node>>> reconciled(tracing::action& act, command_context& ctx,
                                                                 node_access& access, diagnostics& diag) {
  std::string notice;
  if (auto usable = co_await access.registry.ensure_usable(act, notice, diag); !usable) co_return usable.error();
  if (!notice.empty()) fmt::print(stderr, "ferry: warning: {}\n", notice);
  auto nodes = access.registry.load(diag);
  if (!nodes) co_return nodes.error();
  std::set<std::string> ids, providers{ctx.config.values.nodes.provider};
  for (const auto& n : *nodes) {
    ids.insert(n.id);
    providers.insert(n.provider);
  }
  for (const auto& name : providers) {
    diagnostics d;
    auto p = provider_named(ctx, access, name, d);
    result<std::vector<provision::node>> listed = std::vector<provision::node>{};
    if (p)
      listed = co_await (*p)->list(act, d);
    else
      listed = p.error();
    if (!listed) {
      fmt::print(stderr, "ferry: warning: cannot list the {} provider's nodes: {}\n", name, describe(listed.error(), d));
      continue;
    }
    for (auto& n : *listed) {
      if (ids.contains(n.id)) continue;
      n.details["unrecorded"] = true;
      nodes->push_back(std::move(n));
    }
  }
  co_return nodes;
}

asio::awaitable<int> ls(command_context& ctx, const nodes_args&) {
  auto act = ctx.trace.child(action_types::nodes::ls);
  diagnostics diag;
  auto access = open_node_access(ctx, diag);
  if (!access) co_return report(act, access.error(), diag);
  auto nodes = co_await reconciled(act, ctx, *access, diag);
  if (!nodes) co_return report(act, nodes.error(), diag);
  auto current = co_await refreshed(act, ctx, *access, std::move(*nodes));
  print_table(current);
  act.succeed({{"nodes", current.size()}});
  co_return exit_code::success;
}

bool selected(const provision::node& n, const nodes_args& args) {
  if (args.all) return true;
  return std::any_of(args.names.begin(), args.names.end(),
                     [&](const std::string& name) { return name == n.id || name == n.name; });
}

asio::awaitable<int> down(command_context& ctx, const nodes_args& args) {
  auto act = ctx.trace.child(action_types::nodes::down, {{"all", args.all}});
  diagnostics diag;
  if (!args.all && args.names.empty()) {
    diag.set("name the nodes to end (ids or names, see `ferry nodes ls`), or pass --all");
    co_return report(act, provision::errc::node_not_found, diag);
  }
  auto access = open_node_access(ctx, diag);
  if (!access) co_return report(act, access.error(), diag);
  auto nodes = co_await reconciled(act, ctx, *access, diag);
  if (!nodes) co_return report(act, nodes.error(), diag);
  for (const auto& name : args.names) {
    const bool known = std::any_of(nodes->begin(), nodes->end(),
                                   [&](const provision::node& n) { return name == n.id || name == n.name; });
    if (!known) {
      diag.set(fmt::format("no node {} in {}", name, access->registry.file().string()));
      co_return report(act, provision::errc::node_not_found, diag);
    }
  }
  int ended = 0;
  error_code first;
  std::string failures;
  for (const auto& n : *nodes) {
    if (!selected(n, args)) continue;
    diagnostics d;
    auto r = co_await end_node_by_its_provider(act, ctx, *access, n, d);
    if (!r) {
      // The others are still ended: one provider's failure is no reason to leave them running.
      if (!first) first = r.error();
      failures += fmt::format("\n  {}: {}", n.id, describe(r.error(), d));
      continue;
    }
    fmt::print("ended {} ({})\n", n.id, n.name);
    ++ended;
  }
  if (first) {
    diag.set(fmt::format("{} could not be ended:{}",
                         counted(static_cast<std::size_t>(std::count(failures.begin(), failures.end(), '\n')), "node"),
                         failures));
    co_return report(act, first, diag);
  }
  act.succeed({{"ended", ended}});
  co_return exit_code::success;
}

}  // namespace

void add_nodes_commands(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<nodes_args>();
  auto provider = std::make_shared<std::string>();
  auto* nodes = app.add_subcommand("nodes", "start, list and end nodes");
  nodes->require_subcommand(1);

  auto* up_cmd = nodes->add_subcommand("up", "start N nodes and wait until each runs commands over SSH");
  up_cmd->add_option("count", args->count, "how many nodes")->required()->check(CLI::Range(1, config::max_node_count));
  up_cmd->add_option("--provider", *provider, "local, ssh or ec2 (nodes.provider)");
  up_cmd->callback([&selected, args, provider] {
    selected.action_type = action_types::nodes::command;
    if (!provider->empty()) selected.config_flags.push_back({"nodes.provider", *provider, "--provider"});
    selected.run = [args](command_context& ctx) { return up(ctx, *args); };
  });

  auto* ls_cmd = nodes->add_subcommand("ls", "list the nodes ferry made, with state, age and idle time");
  ls_cmd->callback([&selected, args] {
    selected.action_type = action_types::nodes::command;
    selected.run = [args](command_context& ctx) { return ls(ctx, *args); };
  });

  auto* down_cmd = nodes->add_subcommand("down", "end nodes and forget them");
  down_cmd->add_option("nodes", args->names, "node ids or names");
  down_cmd->add_flag("--all", args->all, "every node ferry made");
  down_cmd->callback([&selected, args] {
    selected.action_type = action_types::nodes::command;
    selected.run = [args](command_context& ctx) { return down(ctx, *args); };
  });
}

}  // namespace ferry::agent
