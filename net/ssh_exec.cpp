#include "net/ssh_exec.hpp"

#include "net/cancellation.hpp"
#include "net/error.hpp"
#include "net/run_all.hpp"
#include "net/ssh_exec_channel.hpp"
#include "net/ssh_quote.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <optional>
#include <vector>

namespace ferry::net {
namespace {

using clock = ssh_session::clock;
constexpr auto kill_poll = std::chrono::milliseconds(100);
// How long past the kill's grace the killed command's output is still read: its exit comes after the kill.
constexpr auto drain_margin = std::chrono::seconds(2);

// TERM to the group; KILL once the grace is over and any of it is still there.
std::string kill_command(long group, std::chrono::milliseconds grace) {
  const auto polls = std::max<long long>(1, grace / kill_poll);
  return fmt::format(
      "g={0}; kill -s TERM -- -$g 2>/dev/null || exit 0; n=0; "
      "while kill -s 0 -- -$g 2>/dev/null; do "
      "if [ $n -ge {1} ]; then kill -s KILL -- -$g 2>/dev/null; exit 0; fi; sleep 0.1; n=$((n+1)); done",
      group, polls);
}

// Whether the command's processes may still run after `ec`: the node can still be reached, and ferry
// stopped listening (cancelled, or the sink or source failed) rather than the node refusing the command.
bool may_outlive(const error_code& ec, bool start_refused, const exec_channel& ch, const ssh_session& session) {
  return ec && !start_refused && ch.requested() && session.is_open();
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
  const auto grace = session->settings().kill_grace;
  auto act = parent.child(action_types::ssh::kill, {{"node", session->peer().node}});
  if (!ch.group()) co_await ch.await_group(clock::now() + grace);
  diagnostics diag;
  if (!ch.group()) {
    diag.set(fmt::format("the process group of the command on {} is unknown: it may still run",
                         session->peer().describe()));
    act.fail(make_error_code(errc::ssh_channel_failed), diag);
    co_return;
  }
  act.log(action_types::ssh::kill_group, {{"pgid", *ch.group()}, {"grace_ms", grace.count()}});
  exec_request kill{kill_command(*ch.group(), grace)};
  std::optional<result<exit_info>> killed;
  // The command's output is read (and dropped) meanwhile: one blocked writing to its channel, which
  // nobody read once ferry was cancelled, could not act on the TERM and would be KILLed unclean.
  std::vector<asio::awaitable<void>> both;
  both.push_back(run_kill(act, session, kill, killed, diag));
  both.push_back(ch.drain(clock::now() + grace + drain_margin));
  co_await run_all(std::move(both));
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
  auto ec = co_await ch.start(diag);
  const bool start_refused = ec && ec != asio::error::operation_aborted;
  if (!ec) ec = co_await ch.run(diag);
  if (k == exec_channel::kind::command && may_outlive(ec, start_refused, ch, *session))
    co_await stop_remote(act, session, ch);
  act.log(action_types::ssh::exec_bytes,
          {{"stdout", ch.bytes_out()}, {"stderr", ch.bytes_err()}, {"stdin", ch.bytes_in()}});
  if (ec) co_return result<exit_info>(boost::system::in_place_error, ec);
  if (!ch.exit().status && ch.exit().signal.empty()) {
    diag.set(fmt::format("{} closed the channel of '{}' without an exit status", session->peer().describe(),
                         request.command));
    co_return make_error_code(errc::ssh_channel_failed);
  }
  co_return ch.exit();
}

}  // namespace

std::string exit_info::describe() const {
  if (status) return fmt::format("exit status {}", *status);
  if (!signal.empty()) return fmt::format("killed by signal {}{}", signal, core_dumped ? " (core dumped)" : "");
  return "no exit status";
}

std::string wrap_in_process_group(std::string_view command) {
  // The command follows as lines of its own, for the shell sshd started: no exec of another shell,
  // and the shell execs a final simple command itself, as it does for plain ssh.
  const auto leader = "printf 'ferry-exec-pgid=%s\\n' \"$$\"\n" + std::string(command);
  // Field 5 of /proc/$$/stat is the process group; the name in field 2 of a shell holds no blank.
  return "read -r ferry_p ferry_c ferry_s ferry_pp ferry_g ferry_rest </proc/$$/stat 2>/dev/null && "
         "[ \"$ferry_g\" = \"$$\" ] || exec setsid -w /bin/sh -c -- " +
         shell_quote(leader) + "\nunset ferry_p ferry_c ferry_s ferry_pp ferry_g ferry_rest; " + leader;
}

asio::awaitable<result<exit_info>> exec(tracing::action& parent, ssh_session& session, const exec_request& request,
                                        diagnostics& diag) {
  co_await asio::this_coro::throw_if_cancelled(false);
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
  collect_sink sink(max_output);
  buffer_source source(input);
  exec_request request{std::move(command), input.empty() ? nullptr : &source, &sink};
  auto r = co_await exec(parent, session, request, diag);
  if (!r) co_return r.error();
  co_return command_output{*r, std::move(sink.out), std::move(sink.err)};
}

}  // namespace ferry::net
