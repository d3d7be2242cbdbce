#include "agent/cli/cli.hpp"

#include "agent/cli/report.hpp"
#include "agent/commands/command.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/cli/shutdown.hpp"
#include "config/spelling.hpp"
#include "net/cancellation.hpp"
#include "tracing/action_types.hpp"
#include "tracing/error.hpp"
#include "tracing/sink.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <unistd.h>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;

void add_global_options(CLI::App& app, global_options& g) {
  app.add_option("--config", g.config_file, "configuration file to use instead of ./ferry.toml");
  app.add_option("--trace", g.trace_file, "write this command's trace (JSON lines) to FILE");
  app.add_flag_function("-v,--verbose", [&g](std::int64_t n) { g.verbosity += static_cast<int>(n); },
                        "also say where this command's trace is written");
  app.add_flag_function("-q,--quiet", [&g](std::int64_t n) { g.verbosity -= static_cast<int>(n); },
                        "say only what went wrong");
}

CLI::App* deepest_command(CLI::App& app) {
  CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  return at;
}

std::string command_path(CLI::App& app, const CLI::App* at) {
  std::string path;
  for (const auto* c = at; c && c != &app; c = c->get_parent()) path.insert(0, " " + c->get_name());
  return "ferry" + path;
}

// An option that no command knows, named before anything else is said (CLI11 would first complain of a
// missing argument). Before `--` it is never the start of a command to run: that comes after `--` only.
std::optional<std::string> unknown_option(CLI::App& app) {
  for (const auto& word : app.remaining(true)) {
    if (word.size() > 1 && word.starts_with('-')) {
      const auto path = command_path(app, deepest_command(app));
      return fmt::format("unknown option '{}' for '{}' (see '{} --help')", word, path, path);
    }
  }
  return std::nullopt;
}

// When parsing stopped at a word that names no command ("ferry frobnicate", "ferry nodes frob"): that word,
// with the nearest command's name or the list of commands.
std::optional<std::string> unknown_command(CLI::App& app) {
  CLI::App* at = deepest_command(app);
  const auto rest = at->remaining();
  if (rest.empty() || rest.front().starts_with('-')) return std::nullopt;
  std::vector<std::string_view> names;
  const CLI::App& here = *at;
  for (const auto* sub : here.get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); })) {
    names.push_back(sub->get_name());
  }
  if (names.empty()) return std::nullopt;
  const auto path = command_path(app, at);
  const auto hint = config::closest_word(rest.front(), names);
  return fmt::format("'{}' is not a command of '{}' ({})", rest.front(), path,
                     hint.empty() ? fmt::format("commands: {}", fmt::join(names, ", "))
                                  : fmt::format("did you mean '{}'?", hint));
}

// The user's command is only ever what follows `--`, which run_cli sets aside before parsing. A command
// that let CLI11 gather unknown arguments (allow_extras, prefix_command) would take an unknown option for
// the start of a command to run, and run it: a bug, caught here for every command at once.
void check_no_command_takes_extras(const CLI::App& app) {
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_allow_extras() || sub->get_prefix_command()) {
      throw std::logic_error(fmt::format("ferry {}: takes unknown arguments; its command comes after -- only",
                                         sub->get_name()));
    }
    check_no_command_takes_extras(*sub);
  }
}

// Parses the command line; returns an exit code when there is nothing more to do (help, usage error).
std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    auto said = unknown_option(app);
    if (!said) said = unknown_command(app);
    print_error(said.value_or(e.what()));
    fmt::print(stderr, "Run 'ferry --help' for usage.\n");
    return exit_code::usage;
  }
  return std::nullopt;
}

// --trace FILE, else a new file under the XDG state dir. It does not depend on the configuration, so
// that loading the configuration is itself traced (and its failures too).
std::filesystem::path trace_path(const global_options& g, std::string_view action_type) {
  if (!g.trace_file.empty()) return g.trace_file;
  const auto dir = config::xdg_paths(config::process_env()).state / "traces";
  std::string name(action_type);
  for (auto& c : name)
    if (c == ':') c = '-';
  const auto now = std::chrono::system_clock::now();
  return dir / fmt::format("{:%Y%m%dT%H%M%S}-{}-{}.jsonl", fmt::gmtime(std::chrono::system_clock::to_time_t(now)),
                           ::getpid(), name);
}

// The command's root action: a new task, or the continuation of FERRY_TASK_ID.
result<tracing::action> open_root(tracing::sink& out, std::string_view action_type, diagnostics& diag) {
  const tracing::fields f = {{"ferry_version", FERRY_VERSION}, {"pid", static_cast<std::int64_t>(::getpid())}};
  const char* parent = std::getenv("FERRY_TASK_ID");
  if (!parent || !*parent) return tracing::action::start_task(out, action_type, f);
  auto id = tracing::parse_task_id(parent, diag);
  if (!id) {
    diag.set("FERRY_TASK_ID: " + diag.message);
    return id.error();
  }
  return tracing::action::continue_task(out, *id, action_type, f);
}

// Ctrl-C asks for total cancellation, which reaches the command as operation_aborted (net/cancellation).
asio::awaitable<int> cancellable(const selected_command& selected, command_context& ctx) {
  co_await net::accept_cancellation();
  co_return co_await selected.run(ctx);
}

// Runs the command on one io_context thread (plus the CPU pool) until it returns or is interrupted.
int run_command(const selected_command& selected, command_context& ctx, asio::io_context& io, shutdown& stop) {
  int code = exit_code::failure;
  asio::co_spawn(io, cancellable(selected, ctx),
                 asio::bind_cancellation_slot(stop.slot(), [&](std::exception_ptr error, int result_code) {
                   stop.done();
                   if (!error) {
                     code = result_code;
                     return;
                   }
                   try {
                     std::rethrow_exception(error);
                   } catch (const std::exception& e) {
                     ctx.trace.fail_exception("exception", e.what());
                     print_error(e.what());
                   }
                 }));
  io.run();
  if (!stop.interrupted() && code != exit_code::interrupted) return code;
  // One line whatever the command was doing when Ctrl-C came (its summary, if any, came before).
  fmt::print(stderr, "ferry: interrupted\n");
  return exit_code::interrupted;
}

result<config::loaded_config> load_config(tracing::action& root, const global_options& g,
                                          const selected_command& selected, diagnostics& diag) {
  auto act = root.child(action_types::cli::config_load);
  config::load_options options;
  if (!g.config_file.empty()) options.config_file = g.config_file;
  options.flags = selected.config_flags;
  auto cfg = config::load(options, diag);
  if (cfg && cfg->files.empty())
    act.succeed();
  else if (cfg)
    act.succeed({{"files", fmt::format("{}", fmt::join(cfg->files, ", "))}});
  else
    act.fail(cfg.error(), diag);
  return cfg;
}

void end_root(tracing::action& root, int code) {
  if (root.finished()) return;
  if (code == exit_code::success)
    root.succeed({{"exit_code", code}});
  else if (code == exit_code::interrupted)
    root.fail(asio::error::operation_aborted, "cancelled", {{"exit_code", code}});
  else
    root.fail_exception("exit", fmt::format("exit code {}", code));
}

// `--env NAME=VALUE` values may be secrets, and any user of this machine can read a process's argv in
// /proc. Once parsed (CLI11 holds copies), each value is overwritten in place, as database clients do
// with passwords; `--env NAME`, which takes the value from ferry's own environment, leaves none there.
void hide_env_values(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    char* text = nullptr;
    if (a == "--env" && i + 1 < argc) text = argv[++i];
    else if (a.starts_with("--env=")) text = argv[i] + 6;
    if (!text) continue;
    if (char* eq = std::strchr(text, '='); eq) std::memset(eq + 1, 'x', std::strlen(eq + 1));
  }
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"ferry: run a Python project on remote machines", "ferry"};
  app.require_subcommand(1);
  app.set_help_flag("-h,--help", "print this help and exit");  // before the commands: each takes it over
  app.footer("Examples:\n"
             "  ferry doctor                                   check credentials, storage and ssh\n"
             "  ferry run -- python train.py                   run a script on a node with the project in place\n"
             "  ferry run --nodes 4 -- python -m mypkg.job     the same on 4 nodes\n"
             "  ferry map --range 1..100 -- python task.py {}  one task per input, spread over nodes\n"
             "  ferry pack --explain data/big.csv              what ships, and why a path is in or out\n"
             "  ferry trace stats TRACE.jsonl                  where a command's time went\n"
             "Run 'ferry COMMAND --help' for a command's options.");
  global_options g;
  add_global_options(app, g);
  selected_command selected;
  add_version_command(app, selected);
  add_config_commands(app, selected);
  add_trace_commands(app, selected);
  add_storage_commands(app, selected);
  add_pool_commands(app, selected);
  add_pack_command(app, selected);
  add_nodes_commands(app, selected);
  add_exec_command(app, selected);
  add_run_command(app, selected);
  add_map_command(app, selected);
  add_warmup_command(app, selected);
  add_cluster_commands(app, selected);
  add_doctor_command(app, selected);
  add_api_command(app, selected);
  check_no_command_takes_extras(app);
  // The user's command after `--` is set aside before parsing: CLI11 would read its options as ours.
  int ours = 1;
  while (ours < argc && std::string_view(argv[ours]) != "--") ++ours;
  if (ours < argc) g.command.assign(argv + ours + 1, argv + argc);
  if (auto code = parse(app, ours, argv)) return *code;
  hide_env_values(ours, argv);
  if (ours < argc && !selected.takes_command) {
    print_error("this command takes no command after --");
    return exit_code::usage;
  }

  const auto path = trace_path(g, selected.action_type);
  diagnostics sink_diag;
  auto out = tracing::sink::open(path, sink_diag);
  if (!out) {
    print_error(sink_diag.message);
    return exit_code::failure;
  }
  (*out)->flush_on_terminate();
  if (g.verbosity > 0) fmt::print(stderr, "ferry: trace: {}\n", path.string());

  diagnostics root_diag;
  auto root = open_root(**out, selected.action_type, root_diag);
  if (!root) {
    print_error(root_diag.message);
    return exit_code::usage;
  }
  diagnostics config_diag;
  auto cfg = load_config(*root, g, selected, config_diag);
  if (!cfg) {
    print_error(config_diag.message);
    root->fail(cfg.error(), config_diag, {{"exit_code", exit_code::usage}});
    return exit_code::usage;
  }

  int code = exit_code::failure;
  {
    net::cpu_pool cpu(static_cast<std::size_t>(cfg->values.packaging.hash_threads));
    asio::io_context io(1);
    shutdown stop(io, cfg->values.agent.shutdown_grace);
    command_context ctx{*cfg, g, *root, cpu, io.get_executor(), ::isatty(STDOUT_FILENO) == 1};
    code = run_command(selected, ctx, io, stop);
  }  // the io_context goes first: frames it still holds end their actions before the root ends
  end_root(*root, code);
  return code;
}

}  // namespace ferry::agent
