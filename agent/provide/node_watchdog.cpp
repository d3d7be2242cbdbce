#include "agent/provide/node_watchdog.hpp"

#include "agent/error.hpp"
#include "agent/node/idle_watchdog.hpp"
#include "agent/materialise/node_call.hpp"
#include "net/node_link.hpp"
#include "net/shell_quote.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ferry::agent {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;

// Sets the node's watchdog to `request` (no idle timeout: none), under `act`; the outcome.
asio::awaitable<result<std::string>> set_on_node(tracing::action& act, net::node_link& link,
                                                 const provision::node& n, node::watchdog_request request,
                                                 const std::filesystem::path& program_path, std::string_view doing,
                                                 diagnostics& diag) {
  auto program = shared_node_program(program_path, diag);
  if (!program) co_return program.error();
  const node_call call{*program, {}, {}, "watchdog", action_types::node::watchdog};
  auto trace = node_trace(act, n.name);
  auto answer = co_await call_node(act, link, call, text_input([&](const std::string& task_id) {
                                     request.task_id = task_id;
                                     return node::watchdog_line(request);
                                   }),
                                   *trace, diag);
  if (!answer) co_return answer.error();
  if (!answer->succeeded()) {
    diagnostics why;
    const auto ec = node_failure(*answer, n.name, make_error_code(errc::watchdog_failed), why);
    diag.set(fmt::format("node {} ({}): {} failed: {}", n.name, n.id, doing, why.message));
    co_return ec;
  }
  co_return end_text(*answer, "outcome");
}

}  // namespace

watchdog_paths watchdog_paths::at(const std::filesystem::path& dir) {
  return {net::shell_quote(dir.string()), dir.string()};
}

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
  w.program = s.agent.node_program;
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

asio::awaitable<result<void>> install_watchdog(tracing::action& parent, net::node_link& link,
                                               const provision::node& n, std::string_view stop_command,
                                               const watchdog_settings& s, diagnostics& diag) {
  if (is_pinned(n) || stop_command.empty() || !s.enabled())
    co_return co_await uninstall_watchdog(parent, link, n, s.paths, s.program, diag);
  auto act = parent.child(action_types::agent::watchdog_install, {{"node", n.id},
                                                                  {"idle_timeout_ms", s.idle_timeout.count()},
                                                                  {"interval_ms", s.interval.count()}});
  const node::watchdog_request request{{}, s.paths.dir, s.idle_timeout.count(), s.interval.count(),
                                      std::string(stop_command)};
  auto done = co_await set_on_node(act, link, n, request, s.program, "installing the idle watchdog", diag);
  if (!done) {
    act.fail(done.error(), diag);
    co_return done.error();
  }
  act.succeed({{"outcome", *done}});
  co_return result<void>{};
}

asio::awaitable<result<void>> uninstall_watchdog(tracing::action& parent, net::node_link& link,
                                                 const provision::node& n, const watchdog_paths& paths,
                                                 const std::filesystem::path& program, diagnostics& diag) {
  auto act = parent.child(action_types::agent::watchdog_uninstall, {{"node", n.id}, {"pinned", is_pinned(n)}});
  const node::watchdog_request request{{}, paths.dir, 0, 0, {}};
  auto done = co_await set_on_node(act, link, n, request, program, "stopping the idle watchdog", diag);
  if (!done) {
    act.fail(done.error(), diag);
    co_return done.error();
  }
  act.succeed({{"outcome", *done}});
  co_return result<void>{};
}

}  // namespace ferry::agent
