#include "agent/node_watchdog.hpp"

#include "agent/error.hpp"
#include "net/ssh_exec.hpp"
#include "net/ssh_quote.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ferry::agent {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;

// Whether the pid in watchdog.pid is a watchdog that still runs (a zombie's cmdline is empty). Sets $p.
constexpr std::string_view alive_function =
    "alive() { p=$(cat \"$d/watchdog.pid\" 2>/dev/null) && [ -n \"$p\" ] && kill -0 \"$p\" 2>/dev/null && "
    "case $(tr '\\0' ' ' <\"/proc/$p/cmdline\" 2>/dev/null) in *watchdog.sh*) ;; *) false;; esac; }\n";

// The idle timeout as the script counts it: whole seconds (mtimes have that grain), at least one.
long long whole_seconds(milliseconds d) { return std::max<long long>(1, (d.count() + 999) / 1000); }

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// The install line: the script comes on stdin; prints started, replaced or unchanged.
std::string install_command(const watchdog_paths& paths) {
  return fmt::format(
      "d={}\n"
      "mkdir -p \"$d/busy\" || exit 1\n"
      "{}"
      "cat >\"$d/watchdog.sh.new\" || exit 1\n"
      "if alive && [ \"$(cat \"$d/watchdog.sh.new\")\" = \"$(cat \"$d/watchdog.sh\" 2>/dev/null)\" ]; then\n"
      "  rm -f \"$d/watchdog.sh.new\"; echo unchanged; exit 0\n"
      "fi\n"
      "what=started\n"
      "if alive; then kill -s TERM -- \"-$p\" 2>/dev/null; what=replaced; fi\n"
      "mv -f \"$d/watchdog.sh.new\" \"$d/watchdog.sh\" || exit 1\n"
      "setsid /bin/sh \"$d/watchdog.sh\" \"$d\" </dev/null >>\"$d/watchdog.log\" 2>&1 &\n"
      "echo $! >\"$d/watchdog.pid\"\n"
      "echo $what\n",
      paths.state_dir, alive_function);
}

// The uninstall line: prints stopped or none.
std::string uninstall_command(const watchdog_paths& paths) {
  return fmt::format(
      "d={}\n"
      "{}"
      "if alive; then kill -s TERM -- \"-$p\" 2>/dev/null; what=stopped; else what=none; fi\n"
      "rm -f \"$d/watchdog.pid\" 2>/dev/null\n"
      "echo $what\n",
      paths.state_dir, alive_function);
}

asio::awaitable<result<std::string>> run_on_node(tracing::action& act, net::ssh_session& session,
                                                 const provision::node& n, std::string command, std::string_view input,
                                                 std::string_view doing, diagnostics& diag) {
  auto ran = co_await net::run_command(act, session, std::move(command), diag, input);
  if (!ran) co_return ran.error();
  if (!ran->exit.success()) {
    diag.set(fmt::format("node {} ({}): {} failed with {}: {}", n.name, n.id, doing, ran->exit.describe(),
                         trimmed(ran->err)));
    co_return make_error_code(errc::watchdog_failed);
  }
  co_return trimmed(std::move(ran->out));
}

}  // namespace

watchdog_paths watchdog_paths::at(const std::filesystem::path& dir) { return {net::shell_quote(dir.string())}; }

std::string activity_wrapper(std::string_view command, const watchdog_paths& paths) {
  // $$ is the shell sshd started, the process group's leader (ssh_exec's wrapper runs the lines it is
  // given in that shell). `true >file` rather than `: >file`: a failed redirection of a special builtin
  // such as `:` would end the shell, and the command must run whatever becomes of its marker.
  return fmt::format(
      "ferry_state={}\n"
      "{{ true >\"$ferry_state/busy/$$\" && true >\"$ferry_state/last-used\"; }} 2>/dev/null || "
      "{{ mkdir -p \"$ferry_state/busy\" && true >\"$ferry_state/busy/$$\" && "
      "true >\"$ferry_state/last-used\"; }} 2>/dev/null\n"
      "unset ferry_state\n"
      "{}",
      paths.state_dir, command);
}

watchdog_settings watchdog_settings::from(const config::settings& s) {
  watchdog_settings w;
  w.idle_timeout = s.nodes.idle_timeout;
  w.interval = s.nodes.watchdog_interval;
  if (w.interval.count() <= 0 || w.interval > w.idle_timeout) w.interval = w.idle_timeout;
  return w;
}

bool has_watchdog(const provision::node& n) {
  const auto* v = n.details.if_contains("watchdog");
  return v && v->is_object();
}

void note_watchdog(provision::node& n, const watchdog_settings* installed) {
  if (!installed) {
    n.details.erase("watchdog");
    return;
  }
  n.details["watchdog"] = json::object{{"idle_timeout_ms", installed->idle_timeout.count()},
                                       {"interval_ms", installed->interval.count()}};
}

std::string command_for(const provision::node& n, std::string_view command, const watchdog_paths& paths) {
  return has_watchdog(n) ? activity_wrapper(command, paths) : std::string(command);
}

std::string watchdog_script(const watchdog_settings& s, std::string_view stop_command) {
  return fmt::format(
      "#!/bin/sh\n"
      "# ferry's idle watchdog: stops this node once no command has run for {timeout}s (nodes.idle_timeout).\n"
      "# Run detached by `ferry nodes up`, with the state dir as $1; it logs to watchdog.log there.\n"
      "d=$1\n"
      "idle_timeout={timeout}\n"
      "interval={interval:.3f}\n"
      "stop={stop}\n"
      "log() {{ printf '%s watchdog[%s]: %s\\n' \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" $$ \"$*\"; }}\n"
      "# A marker's process still runs (a zombie no longer counts).\n"
      "alive() {{\n"
      "  kill -0 \"$1\" 2>/dev/null || return 1\n"
      "  read -r s <\"/proc/$1/stat\" 2>/dev/null || return 0\n"
      "  s=${{s##*) }}\n"
      "  [ \"${{s%% *}}\" != Z ]\n"
      "}}\n"
      "trap 'log \"ended by SIGTERM\"; exit 0' TERM\n"
      "[ -e \"$d/last-used\" ] || true >\"$d/last-used\"\n"
      "log \"watching: the node stops itself after ${{idle_timeout}}s without commands, checked every ${{interval}}s\"\n"
      "while :; do\n"
      "  sleep $interval\n"
      "  busy=0\n"
      "  for m in \"$d\"/busy/*; do\n"
      "    [ -e \"$m\" ] || continue\n"
      "    if alive \"${{m##*/}}\"; then busy=$((busy + 1)); else rm -f \"$m\"; true >\"$d/last-used\"; fi\n"
      "  done\n"
      "  [ $busy -eq 0 ] || continue\n"
      "  last=$(stat -c %Y \"$d/last-used\" 2>/dev/null) || {{ true >\"$d/last-used\"; continue; }}\n"
      "  idle=$(($(date +%s) - last))\n"
      "  [ $idle -ge $idle_timeout ] || continue\n"
      "  why=\"idle for ${{idle}}s with no command running (nodes.idle_timeout ${{idle_timeout}}s)\"\n"
      "  log \"$why: stopping the node\"\n"
      "  FERRY_STOP_REASON=\"stopped itself: $why\" /bin/sh -c \"$stop\"\n"
      "  status=$?\n"
      "  if [ $status -eq 0 ]; then log \"stop command done\"; exit 0; fi\n"
      "  log \"the stop command failed with exit status $status: trying again after another ${{idle_timeout}}s\"\n"
      "  true >\"$d/last-used\"\n"
      "done\n",
      fmt::arg("timeout", whole_seconds(s.idle_timeout)),
      fmt::arg("interval", static_cast<double>(std::max<long long>(1, s.interval.count())) / 1000.0),
      fmt::arg("stop", net::shell_quote(stop_command)));
}

asio::awaitable<result<void>> install_watchdog(tracing::action& parent, net::ssh_session& session,
                                               const provision::node& n, std::string_view stop_command,
                                               const watchdog_settings& s, diagnostics& diag) {
  if (is_pinned(n) || stop_command.empty() || !s.enabled())
    co_return co_await uninstall_watchdog(parent, session, n, s.paths, diag);
  auto act = parent.child("ferry:watchdog:install", {{"node", n.id},
                                                     {"idle_timeout_ms", s.idle_timeout.count()},
                                                     {"interval_ms", s.interval.count()}});
  const auto script = watchdog_script(s, stop_command);
  auto done = co_await run_on_node(act, session, n, install_command(s.paths), script, "installing the idle watchdog",
                                   diag);
  if (!done) {
    act.fail(done.error(), diag);
    co_return done.error();
  }
  act.succeed({{"outcome", *done}});
  co_return result<void>{};
}

asio::awaitable<result<void>> uninstall_watchdog(tracing::action& parent, net::ssh_session& session,
                                                 const provision::node& n, const watchdog_paths& paths,
                                                 diagnostics& diag) {
  auto act = parent.child("ferry:watchdog:uninstall", {{"node", n.id}, {"pinned", is_pinned(n)}});
  auto done = co_await run_on_node(act, session, n, uninstall_command(paths), {}, "stopping the idle watchdog", diag);
  if (!done) {
    act.fail(done.error(), diag);
    co_return done.error();
  }
  act.succeed({{"outcome", *done}});
  co_return result<void>{};
}

}  // namespace ferry::agent
