// `ferry pool ls [NAME]`: a team pool's nodes and leases as storage holds them. `ferry pool up|down [NAME]`:
// start the pool's minimum, end its nodes (agent/provide/pool_admin.hpp). `ferry pool simulate`: what
// other policies of a team's pool would have done with the jobs in traces. `ferry pool stats`: what the
// pool did in the traces of the agents that leased from it.
#include "agent/commands/command.hpp"

#include "agent/cli/exit_code.hpp"
#include "agent/cli/json_output.hpp"
#include "agent/cli/plural.hpp"
#include "agent/cli/report.hpp"
#include "agent/cli/trace_input.hpp"
#include "agent/error.hpp"
#include "agent/pack/pack_job.hpp"
#include "agent/provide/node_access.hpp"
#include "agent/provide/pool_admin.hpp"
#include "agent/pool/pool_chart.hpp"
#include "agent/pool/pool_lease.hpp"
#include "agent/pool/pool_simulator.hpp"
#include "agent/pool/pool_stats.hpp"
#include "agent/pool/pool_store.hpp"
#include "agent/pool/pool_workload.hpp"
#include "config/units.hpp"
#include "net/atomic_file.hpp"
#include "net/offload.hpp"
#include "net/s3_session.hpp"
#include "tracing/action_types.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <set>

namespace ferry::agent {
namespace {

using namespace pool;

struct ls_args {
  std::string name;
  bool json = false;
};

// "12m" for a span of seconds, as people read a lease's time left.
std::string span_text(pool_time seconds) {
  if (seconds < 120) return fmt::format("{}s", seconds);
  if (seconds < 7200) return fmt::format("{}m", seconds / 60);
  return fmt::format("{}h", seconds / 3600);
}

boost::json::object record_json(const pool_entry& e, pool_time now) {
  const auto& r = e.record;
  boost::json::array leases;
  for (const auto& l : r.leases)
    leases.push_back({{"id", l.id},
                      {"tenant", l.tenant},
                      {"slots", l.slots},
                      {"holder", l.holder},
                      {"expires_at", l.expires_at},
                      {"expired", l.expired(now)}});
  boost::json::object o{{"node", r.node_id},   {"provider", r.provider},       {"provider_id", r.provider_id},
                        {"address", r.address}, {"ssh_port", r.ssh_port},     {"capacity", r.capacity},
                        {"used", used_slots(r, now)}, {"created_at", r.created_at}, {"created_by", r.created_by},
                        {"leases", leases}};
  if (const auto idle = idle_from(r, now)) o["idle_since"] = *idle;
  return o;
}

std::string record_line(const pool_entry& e, pool_time now) {
  const auto& r = e.record;
  std::string leases;
  for (const auto& l : r.leases) {
    if (l.expired(now)) continue;
    leases += fmt::format("{}{} ({}, {} left)", leases.empty() ? "" : ", ", l.tenant, l.slots, span_text(l.expires_at - now));
  }
  if (leases.empty())
    if (const auto idle = idle_from(r, now)) leases = fmt::format("idle for {}", span_text(now - *idle));
  return fmt::format("{:<12} {:<8} {:<22} {:>5}  {}\n", r.node_id, r.provider, fmt::format("{}:{}", r.address, r.ssh_port),
                     fmt::format("{}/{}", used_slots(r, now), r.capacity), leases);
}

// NAME, else pool.name; empty when neither says.
std::string pool_name_of(const command_context& ctx, const std::string& name) {
  return name.empty() ? ctx.config.values.pool.name : name;
}

boost::asio::awaitable<int> ls_command(command_context& ctx, ls_args args) {
  args.name = pool_name_of(ctx, args.name);
  auto act = ctx.trace.child(action_types::pool::ls, {{"pool", args.name}});
  diagnostics diag;
  if (args.name.empty()) {
    print_error("which pool? name it (ferry pool ls NAME) or set pool.name");
    act.fail(make_error_code(errc::bad_pool_name), "no pool named");
    co_return exit_code::usage;
  }
  if (auto named = check_pool_name(args.name, diag); !named) {
    print_error(diag.message);
    act.fail(named.error(), diag);
    co_return exit_code::usage;
  }
  const auto& url = ctx.config.storage.url;
  if (!url) {
    diag.set("storage.url is not set: a pool lives in storage (put storage.url = \"s3://BUCKET/PREFIX\" in ferry.toml)");
    co_return report(act, make_error_code(errc::no_storage), diag);
  }
  auto session = net::open_s3_session(ctx.io, ctx.cpu, ctx.config.values, net::process_environment(), diag, stall_notice());
  if (!session) co_return report(act, session.error(), diag);
  pool_store store(*session->s3, pool_at(url->bucket, url->key, args.name));
  auto snapshot = co_await store.read(act, diag);
  if (!snapshot) co_return report(act, snapshot.error(), diag);
  const auto now = wall_clock_now();
  act.succeed({{"nodes", snapshot->nodes.size()}, {"unreadable", snapshot->unreadable.size()}});
  if (args.json) {
    boost::json::array nodes;
    for (const auto& e : snapshot->nodes) nodes.push_back(record_json(e, now));
    boost::json::array unreadable;
    for (const auto& u : snapshot->unreadable) unreadable.push_back(boost::json::string(u));
    fmt::print("{}\n", json_line(boost::json::object{{"pool", args.name}, {"nodes", nodes}, {"unreadable", unreadable}}));
    co_return exit_code::success;
  }
  int used = 0, capacity = 0;
  for (const auto& e : snapshot->nodes) {
    used += used_slots(e.record, now);
    capacity += e.record.capacity;
  }
  fmt::print("pool {} (s3://{}/{}): {}, {} of {} slots leased\n", args.name, url->bucket, store.where().prefix,
             counted(snapshot->size(), "node"), used, capacity);
  if (!snapshot->nodes.empty())
    fmt::print("{:<12} {:<8} {:<22} {:>5}  {}\n", "node", "provider", "address", "slots", "leases");
  for (const auto& e : snapshot->nodes) fmt::print("{}", record_line(e, now));
  for (const auto& u : snapshot->unreadable)
    fmt::print("{:<12} unreadable: its record breaks the pool's rules (the trace's ferry:pool:unreadable says how)\n", u);
  co_return exit_code::success;
}

struct up_down_args {
  std::string name;
  bool force = false;
};

// `pool up` and `pool down`: the pool named (NAME over pool.name), in storage, through this agent's nodes.
boost::asio::awaitable<int> up_down_command(command_context& ctx, const up_down_args& args, bool up) {
  auto config = ctx.config;
  config.values.pool.name = pool_name_of(ctx, args.name);
  command_context named{config, ctx.options, ctx.trace, ctx.cpu, ctx.io, ctx.interactive};
  diagnostics diag;
  if (config.values.pool.name.empty()) {
    print_error(fmt::format("which pool? name it (ferry pool {} NAME) or set pool.name", up ? "up" : "down"));
    co_return exit_code::usage;
  }
  if (auto ok = check_pool_name(config.values.pool.name, diag); !ok) {
    print_error(diag.message);
    co_return exit_code::usage;
  }
  if (config.storage.unset() || config.storage.malformed()) {
    if (config.storage.malformed()) {
      (void)config.storage.refuse(diag);
      co_return report(ctx.trace, make_error_code(errc::no_storage), diag, exit_code::usage);
    }
    diag.set("storage.url is not set: a pool lives in storage (put storage.url = \"s3://BUCKET/PREFIX\" in ferry.toml)");
    co_return report(ctx.trace, make_error_code(errc::no_storage), diag);
  }
  auto session = net::open_s3_session(ctx.io, ctx.cpu, config.values, net::process_environment(), diag, stall_notice());
  if (!session) co_return report(ctx.trace, session.error(), diag);
  auto access = open_node_access(named, diag);
  if (!access) co_return report(ctx.trace, access.error(), diag);
  const auto& name = config.values.pool.name;
  if (up) {
    auto done = co_await pool_up(ctx.trace, named, *session->s3, *access, diag);
    if (!done) co_return report(ctx.trace, done.error(), diag);
    fmt::print("pool {}: {} ({} made now; pool.min_nodes {})\n", name, counted(done->nodes, "node"), done->made,
               config.values.pool.min_nodes);
    co_return exit_code::success;
  }
  auto done = co_await pool_down(ctx.trace, named, *session->s3, *access, args.force, diag);
  if (!done) co_return report(ctx.trace, done.error(), diag);
  fmt::print("pool {}: {} ended{}\n", name, counted(done->ended.size(), "node"),
             done->key_removed ? ", the pool and its key removed" : "");
  for (const auto& k : done->kept) fmt::print(stderr, "ferry: kept {}\n", k);
  co_return done->kept.empty() ? exit_code::success : exit_code::failure;
}

struct simulate_args {
  std::vector<std::string> files;
  std::vector<int> min_nodes{0};
  int max_nodes = 8;
  std::vector<std::string> idle{"30m"};
  std::string boot = "45s";
  std::string poll;  // else pool.poll
  int capacity = 1;
  int per_tenant = 0;
  std::string chart;
  bool json = false;
};

// One policy of the grid: its label and settings.
struct policy_case {
  std::string label;
  pool_policy policy;
};

// Every combination of --min and --idle, or the reason the command line cannot be run.
std::optional<std::vector<policy_case>> policy_grid(const simulate_args& a, config::duration default_poll,
                                                    std::string& why) {
  pool_policy base;
  base.max_nodes = a.max_nodes;
  base.capacity = a.capacity;
  base.max_nodes_per_tenant = a.per_tenant;
  const auto boot = config::parse_duration(a.boot);
  if (!boot) return why = fmt::format("--boot: '{}' is not a duration (e.g. 45s, 2m)", a.boot), std::nullopt;
  base.boot = std::chrono::duration<double>(*boot).count();
  const auto poll = a.poll.empty() ? std::optional(default_poll) : config::parse_duration(a.poll);
  if (!poll) return why = fmt::format("--poll: '{}' is not a duration (e.g. 5s, 500ms)", a.poll), std::nullopt;
  base.poll = std::chrono::duration<double>(*poll).count();
  if (a.max_nodes < 1) return why = "--max: at least 1 node", std::nullopt;
  if (a.capacity < 1) return why = "--capacity: at least 1 slot per node", std::nullopt;
  if (a.per_tenant < 0) return why = "--per-tenant: 0 (no cap) or more nodes", std::nullopt;
  std::vector<policy_case> out;
  for (const int min_nodes : a.min_nodes) {
    if (min_nodes < 0 || min_nodes > a.max_nodes)
      return why = fmt::format("--min: '{}' is not a node count from 0 to --max ({})", min_nodes, a.max_nodes),
             std::nullopt;
    for (const auto& i : a.idle) {
      const auto idle = config::parse_duration(i);
      if (!idle) return why = fmt::format("--idle: '{}' is not a duration (e.g. 5m, 30m)", i), std::nullopt;
      auto p = base;
      p.min_nodes = min_nodes;
      p.idle_timeout = std::chrono::duration<double>(*idle).count();
      out.push_back({fmt::format("min {}, idle {}", min_nodes, i), p});
    }
  }
  return out;
}

std::string table(const std::vector<policy_case>& cases, const std::vector<sim_result>& results) {
  std::string out = fmt::format("{:<22} {:>9} {:>9} {:>9} {:>11} {:>16} {:>12}\n", "policy", "wait p50", "wait p95",
                                "wait max", "node-hours", "idle node-hours", "utilisation");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& r = results[i];
    out += fmt::format("{:<22} {:>7.1f} s {:>7.1f} s {:>7.1f} s {:>11.3f} {:>16.3f} {:>11.1f}%\n", cases[i].label,
                       r.waits.p50, r.waits.p95, r.waits.max, r.node_seconds / 3600, r.idle_node_seconds / 3600,
                       100 * r.utilisation);
    if (r.unplaceable > 0)
      out += fmt::format("  {} never started: more slots than the policy can give\n", counted(r.unplaceable, "job"));
  }
  return out;
}

boost::json::object to_json(const policy_case& c, const sim_result& r) {
  boost::json::object tenants;
  for (const auto& [name, w] : r.tenants)
    tenants[name] = {{"jobs", w.jobs},
                     {"wait_p50", json_seconds(w.p50)},
                     {"wait_p95", json_seconds(w.p95)},
                     {"wait_max", json_seconds(w.max)},
                     {"wait_mean", json_seconds(w.mean)}};
  return {{"policy", c.label},
          {"min_nodes", c.policy.min_nodes},
          {"max_nodes", c.policy.max_nodes},
          {"idle_timeout", json_seconds(c.policy.idle_timeout)},
          {"boot", json_seconds(c.policy.boot)},
          {"poll", json_seconds(c.policy.poll)},
          {"wait_p50", json_seconds(r.waits.p50)},
          {"wait_p95", json_seconds(r.waits.p95)},
          {"wait_max", json_seconds(r.waits.max)},
          {"wait_mean", json_seconds(r.waits.mean)},
          {"node_seconds", json_seconds(r.node_seconds)},
          {"idle_node_seconds", json_seconds(r.idle_node_seconds)},
          {"utilisation", r.utilisation},
          {"never_started", r.unplaceable},
          {"tenants", tenants}};
}

boost::asio::awaitable<int> simulate_command(command_context& ctx, const simulate_args& args) {
  std::string why;
  const auto cases = policy_grid(args, ctx.config.values.pool.poll, why);
  if (!cases) {
    print_error(why);
    co_return exit_code::usage;
  }
  diagnostics diag;
  auto set = co_await read_trace_input(ctx, args.files, diag);
  if (!set) co_return exit_code::failure;
  auto act = ctx.trace.child(action_types::pool::simulate, {{"policies", static_cast<std::uint64_t>(cases->size())}});
  const auto jobs = co_await net::offload(
      ctx.cpu, [&] { return workload_from(tracing::compute_stats(*set, tracing::build_task_trees(*set))); });
  if (jobs.empty()) {
    print_error("no job in these traces ran a task on a node: nothing to replay");
    act.fail_exception("no_jobs", "no job ran a task on a node");
    co_return exit_code::failure;
  }
  const auto results = co_await net::offload(ctx.cpu, [&] {
    std::vector<sim_result> out;
    for (const auto& c : *cases) out.push_back(simulate(jobs, c.policy));
    return out;
  });
  std::set<std::string> tenants;
  double last = 0;
  for (const auto& j : jobs) {
    tenants.insert(j.tenant);
    last = std::max(last, j.arrival);
  }
  act.succeed({{"jobs", static_cast<std::uint64_t>(jobs.size())}, {"tenants", static_cast<std::uint64_t>(tenants.size())}});
  if (!args.chart.empty()) {
    std::vector<chart_line> lines;
    for (std::size_t i = 0; i < cases->size(); ++i) lines.push_back({(*cases)[i].label, results[i].nodes});
    if (auto written = net::write_file_atomically(args.chart, nodes_chart_svg(lines), diag, {.mode = 0644, .make_parent = false});
        !written) {
      print_error(diag.message);
      co_return exit_code::failure;
    }
  }
  if (args.json) {
    boost::json::array out;
    for (std::size_t i = 0; i < cases->size(); ++i) out.push_back(to_json((*cases)[i], results[i]));
    fmt::print("{}\n", json_line(boost::json::object{{"jobs", jobs.size()}, {"tenants", tenants.size()}, {"policies", out}}));
    co_return exit_code::success;
  }
  fmt::print("{} of {} arriving over {:.1f} minutes, replayed with at most {} (boot {}, {} per node{}):\n",
             counted(jobs.size(), "job"), counted(tenants.size(), "tenant"), last / 60,
             counted(static_cast<std::size_t>(args.max_nodes), "node"), args.boot,
             counted(static_cast<std::size_t>(args.capacity), "slot"),
             args.per_tenant > 0 ? fmt::format(", at most {} per tenant", counted(static_cast<std::size_t>(args.per_tenant), "node")) : "");
  fmt::print("{}", table(*cases, results));
  if (args.per_tenant > 0 && tenants.size() == 1 && tenants.count("-"))
    fmt::print(stderr, "ferry: no job in these traces names its tenant: --per-tenant capped them all as one\n");
  co_return exit_code::success;
}

struct stats_args {
  std::vector<std::string> files;
  std::optional<int> slots;  // else pool.node_slots
  std::string idle;          // else pool.idle_timeout
  bool json = false;
};

// The settings from the flags, else from the configuration; nullopt with `why` for a flag that is wrong.
std::optional<pool_stats_settings> stats_settings(const config::settings& values, const stats_args& a,
                                                  std::string& why) {
  pool_stats_settings s;
  s.node_slots = a.slots.value_or(values.pool.node_slots);
  if (s.node_slots < 1) return why = "--slots: at least 1 slot per node", std::nullopt;
  auto idle = values.pool.idle_timeout;
  if (!a.idle.empty()) {
    const auto parsed = config::parse_duration(a.idle);
    if (!parsed) return why = fmt::format("--idle: '{}' is not a duration (e.g. 5m, 30m)", a.idle), std::nullopt;
    idle = *parsed;
  }
  s.idle_timeout = std::chrono::duration<double>(idle).count();
  return s;
}

boost::json::object figures_json(const pool_figures& f) {
  return {{"acquires", f.acquires},
          {"failed", f.failed},
          {"unfinished", f.unfinished},
          {"wait_p50", json_seconds(f.wait_p50)},
          {"wait_p95", json_seconds(f.wait_p95)},
          {"wait_max", json_seconds(f.wait_max)},
          {"wait_mean", json_seconds(f.wait_mean)},
          {"leased_slot_seconds", json_seconds(f.leased_slot_seconds)},
          {"node_seconds", json_seconds(f.node_seconds)},
          {"idle_node_seconds", json_seconds(f.idle_node_seconds)},
          {"utilisation", f.utilisation}};
}

std::string figures_line(std::string_view who, const pool_figures& f) {
  return fmt::format("{:<16} {:>8} {:>6} {:>7.1f} s {:>7.1f} s {:>10.3f} {:>10.3f} {:>11.1f}% {:>15.3f}\n", who,
                     f.acquires, f.failed, f.wait_p50, f.wait_p95, f.leased_slot_seconds / 3600, f.node_seconds / 3600,
                     100 * f.utilisation, f.idle_node_seconds / 3600);
}

std::string stats_table(const pool_stats& s) {
  std::string out = fmt::format("{:<16} {:>8} {:>6} {:>9} {:>9} {:>10} {:>10} {:>12} {:>15}\n", "tenant", "acquires",
                                "failed", "wait p50", "wait p95", "slot-hours", "node-hours", "utilisation",
                                "idle node-hours");
  for (const auto& [tenant, f] : s.tenants) out += figures_line(tenant, f);
  return out + figures_line("(pool)", s.pool);
}

boost::asio::awaitable<int> stats_command(command_context& ctx, const stats_args& args) {
  std::string why;
  const auto settings = stats_settings(ctx.config.values, args, why);
  if (!settings) {
    print_error(why);
    co_return exit_code::usage;
  }
  diagnostics diag;
  auto set = co_await read_trace_input(ctx, args.files, diag);
  if (!set) co_return exit_code::failure;
  auto act = ctx.trace.child(action_types::pool::stats,
                             {{"node_slots", settings->node_slots}, {"idle_timeout", settings->idle_timeout}});
  const auto stats = co_await net::offload(
      ctx.cpu, [&] { return compute_pool_stats(*set, tracing::build_task_trees(*set), *settings); });
  if (stats.empty()) {
    print_error("no pool action in these traces (no ferry:pool:acquire, release or node_left): nothing to count");
    act.fail_exception("no_pool_actions", "no pool action in the traces");
    co_return exit_code::failure;
  }
  act.succeed({{"acquires", stats.pool.acquires},
               {"tenants", static_cast<std::uint64_t>(stats.tenants.size())},
               {"nodes", stats.nodes}});
  if (args.json) {
    boost::json::object tenants;
    for (const auto& [name, f] : stats.tenants) tenants[name] = figures_json(f);
    fmt::print("{}\n", json_line(boost::json::object{{"node_slots", settings->node_slots},
                                                     {"idle_timeout", json_seconds(settings->idle_timeout)},
                                                     {"leases", stats.leases},
                                                     {"releases", stats.releases},
                                                     {"nodes", stats.nodes},
                                                     {"node_left", stats.node_left},
                                                     {"pool", figures_json(stats.pool)},
                                                     {"tenants", tenants}}));
    co_return exit_code::success;
  }
  fmt::print("{} of {}, {} on {} ({} per node; node-hours estimated with an idle timeout of {}, see docs/pool.md):\n",
             counted(stats.pool.acquires, "acquire"), counted(stats.tenants.size(), "tenant"),
             counted(stats.leases, "lease"), counted(stats.nodes, "node"),
             counted(static_cast<std::size_t>(settings->node_slots), "slot"),
             config::format_duration(std::chrono::duration_cast<config::duration>(
                 std::chrono::duration<double>(settings->idle_timeout))));
  fmt::print("{}", stats_table(stats));
  if (stats.pool.unfinished > 0)
    fmt::print("{} never ended (the agent stopped): waited until its task's last message, got nothing\n",
               counted(stats.pool.unfinished, "acquire"));
  co_return exit_code::success;
}

}  // namespace

void add_pool_commands(CLI::App& app, selected_command& selected) {
  auto* pool = app.add_subcommand("pool", "a team's shared pool of nodes");
  pool->fallthrough();
  pool->require_subcommand(1);

  auto ls = std::make_shared<ls_args>();
  auto* ls_cmd = pool->add_subcommand("ls", "list a pool's nodes and who leases their slots, as storage holds them");
  ls_cmd->fallthrough();
  ls_cmd->add_option("name", ls->name, "the pool's name (PREFIX/pools/NAME/ under storage.url); default: pool.name");
  ls_cmd->add_flag("--json", ls->json, "print every record as JSON");
  ls_cmd->callback([&selected, ls] {
    selected.action_type = action_types::pool::command;
    selected.run = [ls](command_context& ctx) { return ls_command(ctx, *ls); };
  });

  for (const bool up : {true, false}) {
    auto a = std::make_shared<up_down_args>();
    auto* cmd = pool->add_subcommand(up ? "up" : "down",
                                     up ? "start the pool's minimum (pool.min_nodes) of nodes"
                                        : "end the pool's nodes that this agent's provider made, and the pool with them");
    cmd->fallthrough();
    cmd->add_option("name", a->name, "the pool's name; default: pool.name");
    if (!up) cmd->add_flag("--force", a->force, "end nodes whose slots are leased too");
    cmd->callback([&selected, a, up] {
      selected.action_type = action_types::pool::command;
      selected.run = [a, up](command_context& ctx) { return up_down_command(ctx, *a, up); };
    });
  }

  auto sim = std::make_shared<simulate_args>();
  auto* sim_cmd = pool->add_subcommand(
      "simulate", "replay the jobs of traces through pool policies: waits, node-hours, utilisation, nodes over time");
  sim_cmd->fallthrough();
  sim_cmd->add_option("files", sim->files, "trace files (JSON lines) or directories of them")->required();
  sim_cmd->add_option("--min", sim->min_nodes, "warm minimums to try, a comma list (e.g. 0,2,4)")
      ->delimiter(',')
      ->capture_default_str();
  sim_cmd->add_option("--max", sim->max_nodes, "the most nodes the pool may have")->capture_default_str();
  sim_cmd->add_option("--idle", sim->idle, "idle timeouts to try, a comma list (e.g. 5m,30m)")
      ->delimiter(',')
      ->capture_default_str();
  sim_cmd->add_option("--boot", sim->boot, "what a new node takes to be ready")->capture_default_str();
  sim_cmd->add_option("--poll", sim->poll, "how often a job waiting for a slot reads the pool (default: pool.poll)");
  sim_cmd->add_option("--capacity", sim->capacity, "slots per node")->capture_default_str();
  sim_cmd->add_option("--per-tenant", sim->per_tenant, "the most nodes' worth of slots one tenant holds; 0: no cap")
      ->capture_default_str();
  sim_cmd->add_option("--chart", sim->chart, "write an SVG chart of nodes over time, a line per policy, to this file");
  sim_cmd->add_flag("--json", sim->json, "print every figure as JSON");
  sim_cmd->callback([&selected, sim] {
    selected.action_type = action_types::pool::command;
    selected.run = [sim](command_context& ctx) { return simulate_command(ctx, *sim); };
  });

  auto st = std::make_shared<stats_args>();
  auto* st_cmd = pool->add_subcommand(
      "stats", "what the pool did in traces: waits for a slot, failed acquires, slot-hours, node-hours, utilisation");
  st_cmd->fallthrough();
  st_cmd->add_option("files", st->files, "trace files (JSON lines) or directories of them; none: the last command's");
  st_cmd->add_option("--slots", st->slots, "slots per node (default: pool.node_slots)");
  st_cmd->add_option("--idle", st->idle, "the pool's idle timeout, for node lifetimes (default: pool.idle_timeout)");
  st_cmd->add_flag("--json", st->json, "print every figure as JSON");
  st_cmd->callback([&selected, st] {
    selected.action_type = action_types::pool::command;
    selected.run = [st](command_context& ctx) { return stats_command(ctx, *st); };
  });
}

}  // namespace ferry::agent
