#include "net/ssh_exec.hpp"

#include "net/cancellation.hpp"
#include "net/exec_lifecycle.hpp"
#include "net/run_all.hpp"
#include "net/shell_quote.hpp"
#include "net/ssh_exec_channel.hpp"
#include "net/ssh_node_link.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <optional>
#include <vector>

namespace ferry::net {
namespace {

using clock = ssh_session::clock;


// Tells the core how start or run failed; a cancellation is told apart by its kind.
asio::awaitable<void> note_failure(exec_lifecycle& core, const error_code& ec, const ssh_session& session) {
  if (ec != asio::error::operation_aborted) {
    core.failed(ec, session.is_open());
    co_return;
  }
  const auto state = co_await asio::this_coro::cancellation_state;
  core.cancelled(kind_of(state.cancelled()), session.is_open());
}

asio::awaitable<result<exit_info>> run_channel(tracing::action& act, std::shared_ptr<ssh_session> session,
                                               const exec_request& request, exec_channel::kind k,
                                               diagnostics& diag);

// The kill command's own run, its result kept in `out`.
asio::awaitable<void> run_kill(tracing::action& act, std::shared_ptr<ssh_session> session, const exec_request& kill,
                               std::optional<result<exit_info>>& out, diagnostics& diag) {
  out = co_await run_channel(act, std::move(session), kill, exec_channel::kind::kill, diag);
}

// Kills the command's process group through another channel. Runs on a coroutine thread of its own,
// which the caller's cancellation does not reach: the caller was cancelled already, and this is the
// cleanup that cancellation asks for.
asio::awaitable<void> kill_group(tracing::action& parent, std::shared_ptr<ssh_session> session, exec_channel& ch) {
  co_await accept_cancellation();
  auto& core = ch.core();
  auto act = parent.child(action_types::ssh::kill, {{"node", session->peer().node}});
  if (core.next().action == exec_action::await_group) {
    co_await ch.await_group(clock::now() + core.next().wait);
    core.group_wait_over();
  }
  diagnostics diag;
  if (core.next().action == exec_action::report_unknown) {
    act.fail(core.unknown_group(diag), diag);
    core.unknown_reported();
    co_return;
  }
  const auto step = core.next();
  act.log(action_types::ssh::kill_group, {{"pgid", step.group}, {"grace_ms", session->settings().kill_grace.count()}});
  exec_request kill{core.kill_line()};
  std::optional<result<exit_info>> killed;
  // The command's output is read (and dropped) meanwhile: one blocked writing to its channel, which
  // nobody read once ferry was cancelled, could not act on the TERM and would be KILLed unclean.
  std::vector<asio::awaitable<void>> both;
  both.push_back(run_kill(act, session, kill, killed, diag));
  both.push_back(ch.drain(clock::now() + step.wait));
  co_await run_all(std::move(both));
  core.kill_finished(*killed);
  core.drain_over();
  act.finish(*killed, diag);
}

asio::awaitable<void> stop_remote(tracing::action& act, const std::shared_ptr<ssh_session>& session,
                                  exec_channel& ch) {
  auto ex = co_await asio::this_coro::executor;
  // Named, not temporaries inside the co_await (GCC 12). The empty slot shields the cleanup.
  auto task = kill_group(act, session, ch);
  auto shielded = asio::bind_cancellation_slot(asio::cancellation_slot(), asio::use_awaitable);
  co_await asio::co_spawn(ex, std::move(task), shielded);
}

asio::awaitable<result<exit_info>> run_channel(tracing::action& act, std::shared_ptr<ssh_session> session,
                                               const exec_request& request, exec_channel::kind k,
                                               diagnostics& diag) {
  exec_channel ch(session, request, k);
  auto& core = ch.core();
  auto ec = co_await ch.start(diag);
  if (!ec) ec = co_await ch.run(diag);
  if (ec) {
    co_await note_failure(core, ec, *session);
  } else {
    core.completed();
  }
  // The core asks for a kill when the command may outlive the failure (never for the kill itself).
  if (!core.done()) co_await stop_remote(act, session, ch);
  act.log(action_types::ssh::exec_bytes, {{"stdout", ch.bytes_out()}, {"stderr", ch.bytes_err()}, {"stdin", ch.bytes_in()}});
  co_return core.outcome(diag);
}

}  // namespace

std::string wrap_in_process_group(std::string_view command) {
  // The command follows as lines of its own, for the shell sshd started: no exec of another shell,
  // and the shell execs a final simple command itself, as it does for plain ssh.
  const auto leader = "printf 'ferry-exec-pgid=%s\\n' \"$$\"\n" + std::string(command);
  // Field 5 of /proc/$$/stat is the process group; the name in field 2 of a shell holds no blank.
  return "read -r ferry_p ferry_c ferry_s ferry_pp ferry_g ferry_rest </proc/$$/stat 2>/dev/null && "
         "[ \"$ferry_g\" = \"$$\" ] || exec setsid -w /bin/sh -c -- " +
         shell_quote(leader) + "\nunset ferry_p ferry_c ferry_s ferry_pp ferry_g ferry_rest; " + leader;
}

std::string run_as_command(std::string_view user, std::string_view command) {
  return "sudo -n -u " + shell_quote(user) + " -- /bin/sh -c " + shell_quote(command);
}

asio::awaitable<result<exit_info>> exec(tracing::action& parent, ssh_session& session, const exec_request& request,
                                        diagnostics& diag) {
  co_await asio::this_coro::throw_if_cancelled(false);
  if (!request.as_user.empty()) {
    auto as_user = request;
    as_user.command = run_as_command(request.as_user, request.command);
    as_user.as_user.clear();
    co_return co_await exec(parent, session, as_user, diag);
  }
  auto act = parent.child(action_types::ssh::exec, {{"node", session.peer().node}, {"command", request.command}});
  auto r = co_await run_channel(act, session.shared_from_this(), request, exec_channel::kind::command, diag);
  if (!r) {
    act.fail(r.error(), diag);
  } else if (r->status) {
    act.succeed({{"exit_status", *r->status}});
  } else {
    act.succeed({{"exit_signal", r->signal}, {"core_dumped", r->core_dumped}});
  }
  co_return r;
}

asio::awaitable<result<command_output>> run_command(tracing::action& parent, ssh_session& session,
                                                    std::string command, diagnostics& diag, std::string_view input,
                                                    std::size_t max_output) {
  ssh_node_link link(session.shared_from_this());
  co_return co_await run_command(parent, link, std::move(command), diag, input, max_output);
}

}  // namespace ferry::net
