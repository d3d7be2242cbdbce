#include "provision/readiness.hpp"

#include "config/units.hpp"
#include "net/cancellation.hpp"
#include "net/deadline.hpp"
#include "net/retry.hpp"
#include "net/fan_out.hpp"
#include "provision/readiness_core.hpp"
#include "provision/ssh_banner.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <atomic>
#include <random>

namespace ferry::provision {
namespace {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

auto on_error(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

std::string label(const node& n) {
  if (n.name.empty() || n.name == n.id) return n.id;
  return fmt::format("{} ({})", n.name, n.id);
}

std::string as_text(milliseconds d) { return config::format_duration(d); }

// One node's wait: the state machine, the node as last described, and why the last attempt failed.
struct waiter {
  waiter(provider& prov, const node& start, const readiness_options& opts)
      : p(prov), n(start), options(opts), core(opts.poll, clock::now()), rng(std::random_device{}()) {}

  double jitter() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }

  // Each attempt's own deadline: the configured one, shortened near the overall deadline but never below
  // the first poll interval, so that the last attempt (at the deadline) still gets a real try.
  milliseconds attempt_timeout() const {
    const auto left = std::chrono::duration_cast<milliseconds>(core.deadline() - clock::now());
    return std::clamp(left, options.poll.initial, std::max(options.poll.initial, options.attempt_timeout));
  }

  provider& p;
  node n;
  const readiness_options& options;
  readiness_core core;
  std::minstd_rand rng;
  diagnostics last;  // the last failed attempt's words
};

asio::awaitable<error_code> sleep_until(clock::time_point t) {
  asio::steady_timer timer(co_await asio::this_coro::executor, t);
  error_code ec;
  co_await timer.async_wait(on_error(ec));
  co_return ec;
}

// Asks the provider once. Only a describe error that retrying cannot cure comes back as an error.
asio::awaitable<error_code> poll_state(tracing::action& stage, waiter& w) {
  auto act = stage.child(action_types::readiness::poll, {{"attempt", w.core.attempts() + 1}});
  diagnostics d;
  auto described = co_await w.p.describe(act, w.n, d);
  if (!described) {
    act.fail(described.error(), d);
    w.last = std::move(d);
    if (!net::is_retryable(described.error())) co_return described.error();
    w.core.describe_failed(clock::now(), w.jitter());
    co_return error_code{};
  }
  w.n = std::move(*described);
  act.succeed({{"state", to_string(w.n.state)}});
  w.core.described(w.n.state, clock::now(), w.jitter());
  co_return error_code{};
}

asio::awaitable<void> logging_in(const login_check& login, tracing::action& act, const node& n, diagnostics& d,
                                 result<void>& out) {
  co_await net::accept_cancellation();
  out = co_await login(act, n, d);
}

// The login callback, bounded by the attempt's deadline whatever the callback does with time.
asio::awaitable<result<void>> login_in_time(const login_check& login, tracing::action& parent, const node& n,
                                            milliseconds timeout, diagnostics& d) {
  auto act = parent.child(action_types::readiness::ssh_login, {{"user", n.user}});
  result<void> out = make_error_code(asio::error::operation_aborted);
  const bool finished = co_await net::with_deadline(logging_in(login, act, n, d, out), timeout);
  if (!finished) {
    out = make_error_code(asio::error::timed_out);
    d.set(fmt::format("{}: login did not finish within {}", label(n), as_text(timeout)));
  }
  act.finish(out, d);
  co_return out;
}

// TCP connect, SSH banner, login: one attempt, its steps traced under it.
asio::awaitable<void> ssh_attempt(tracing::action& stage, waiter& w, const login_check& login) {
  auto act = stage.child(action_types::readiness::ssh_attempt, {{"attempt", w.core.attempts() + 1}});
  const auto timeout = w.attempt_timeout();
  diagnostics d;
  result<void> outcome;  // every path below sets it
  auto socket = co_await connect_to_node(act, w.n, timeout, d);
  if (!socket) outcome = socket.error();
  if (socket) {
    auto banner = co_await read_ssh_banner(act, w.n, *socket, timeout, d);
    error_code ignored;
    socket->close(ignored);
    if (!banner) outcome = banner.error();
    if (banner) outcome = co_await login_in_time(login, act, w.n, timeout, d);
  }
  act.finish(outcome, d);
  if (outcome) {
    w.core.ssh_succeeded();
    co_return;
  }
  w.last = std::move(d);
  w.core.ssh_failed(clock::now(), w.jitter());
}

// Tells the core of the cancellation this coroutine heard; the stage ends with it.
asio::awaitable<error_code> cancel_core(waiter& w) {
  const auto state = co_await asio::this_coro::cancellation_state;
  w.core.cancelled(net::kind_of(state.cancelled()));
  co_return make_error_code(asio::error::operation_aborted);
}

// Carries out the core's steps while it stays in `stage`. An error is a cancellation or a describe error
// not worth retrying; a timeout or a terminated node shows as the core's failure instead.
asio::awaitable<error_code> run_stage(tracing::action& act, waiter& w, readiness_stage stage,
                                      const login_check* login) {
  while (w.core.stage() == stage) {
    if (co_await net::cancelled()) co_return co_await cancel_core(w);
    if (const auto ec = co_await sleep_until(w.core.next_at()))
      co_return ec == asio::error::operation_aborted ? co_await cancel_core(w) : ec;
    if (w.core.next() == readiness_step::ssh_attempt) {
      co_await ssh_attempt(act, w, *login);
      continue;
    }
    if (const auto ec = co_await poll_state(act, w)) co_return ec;
  }
  co_return error_code{};
}

std::string last_words(const waiter& w) {
  return w.last.empty() ? std::string() : fmt::format("; last attempt: {}", w.last.message);
}

// The core failed: diag in the reader's terms, naming the node.
error_code explain_failure(const waiter& w, diagnostics& diag) {
  const auto why = w.core.failure();
  const auto timeout = as_text(w.options.poll.timeout);
  if (why == errc::not_running_in_time)
    diag.set(fmt::format("{} was still {} after {} (nodes.ready_timeout; {} polls){}", label(w.n),
                         to_string(w.n.state), timeout, w.core.attempts(), last_words(w)));
  else if (why == errc::ssh_not_ready_in_time)
    diag.set(fmt::format("{} runs but did not answer SSH at {}:{} within {} (nodes.ready_timeout; {} attempts){}",
                         label(w.n), w.n.host, w.n.port, timeout, w.core.attempts(), last_words(w)));
  else {
    const auto* reason = w.n.details.if_contains("state_reason");
    diag.set(fmt::format("{} is {}: it ended while ferry waited for it{}", label(w.n), to_string(w.n.state),
                         reason && reason->is_string() ? fmt::format(" ({})", std::string_view(reason->get_string()))
                                                       : std::string()));
  }
  return make_error_code(why);
}

// Runs one stage under its own action; the action records how many attempts it took.
asio::awaitable<error_code> traced_stage(tracing::action& parent, std::string_view type, waiter& w,
                                         readiness_stage stage, const login_check* login, diagnostics& diag) {
  auto act = parent.child(type, {{"node", w.n.id}, {"name", w.n.name}});
  auto ec = co_await run_stage(act, w, stage, login);
  if (ec == asio::error::operation_aborted)
    diag.set(fmt::format("{}: wait cancelled", label(w.n)));
  else if (ec)
    diag = w.last;  // the provider's own words about the describe that failed
  else if (w.core.stage() == readiness_stage::failed)
    ec = explain_failure(w, diag);
  act.finish(ec, diag, {{"attempts", w.core.attempts(stage)}, {"state", to_string(w.n.state)}});
  co_return ec;
}

asio::awaitable<error_code> running_stage(tracing::action& parent, waiter& w, diagnostics& diag) {
  co_return co_await traced_stage(parent, action_types::readiness::wait_running, w, readiness_stage::running, nullptr,
                                  diag);
}

asio::awaitable<error_code> ssh_stage(tracing::action& parent, waiter& w, const login_check& login,
                                      diagnostics& diag) {
  w.core.skip_running(clock::now());
  co_return co_await traced_stage(parent, action_types::readiness::wait_ssh, w, readiness_stage::ssh, &login, diag);
}

// ---- many nodes ----

// One node's wait, its outcome kept beside the others': a node that never came up does not stop the rest.
asio::awaitable<result<void>> wait_one(tracing::action& parent, provider& p, const login_check& login,
                                       const readiness_options& options, ready_outcome& o) {
  auto r = co_await wait_ready(parent, p, o.n, login, options, o.diag);
  if (r)
    o.n = std::move(*r);
  else
    o.error = r.error();
  co_return result<void>{};
}

}  // namespace

readiness_options readiness_options_from(const config::settings& s) {
  readiness_options o;
  o.poll = {s.nodes.poll_initial, s.nodes.poll_max, s.nodes.ready_timeout};
  o.attempt_timeout = s.ssh.connect_timeout;
  o.max_parallel = std::max(1, s.ssh.max_sessions);
  return o;
}

asio::awaitable<result<node>> wait_until_running(tracing::action& parent, provider& p, const node& n,
                                                 const readiness_options& options, diagnostics& diag) {
  waiter w(p, n, options);
  if (const auto ec = co_await running_stage(parent, w, diag)) co_return ec;
  co_return w.n;
}

asio::awaitable<result<void>> wait_for_ssh(tracing::action& parent, provider& p, const node& n,
                                           const login_check& login, const readiness_options& options,
                                           diagnostics& diag) {
  waiter w(p, n, options);
  if (const auto ec = co_await ssh_stage(parent, w, login, diag)) co_return ec;
  co_return result<void>{};
}

asio::awaitable<result<node>> wait_ready(tracing::action& parent, provider& p, const node& n,
                                         const login_check& login, const readiness_options& options,
                                         diagnostics& diag) {
  auto act = parent.child(action_types::readiness::ready, {{"node", n.id}, {"name", n.name}});
  waiter w(p, n, options);
  auto ec = co_await running_stage(act, w, diag);
  if (!ec) ec = co_await ssh_stage(act, w, login, diag);
  act.finish(ec, diag, {{"host", w.n.host}, {"port", w.n.port}});
  if (ec) co_return ec;
  co_return w.n;
}

asio::awaitable<std::vector<ready_outcome>> wait_ready_each(tracing::action& parent, provider& p,
                                                            const std::vector<node>& nodes, const login_check& login,
                                                            const readiness_options& options) {
  std::vector<ready_outcome> out(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) out[i].n = nodes[i];
  // max_parallel bounds how many nodes are waited for at once.
  diagnostics ignored;
  co_await net::fan_out(
      nodes.size(), static_cast<std::size_t>(std::max(1, options.max_parallel)),
      [&](std::size_t i, diagnostics&) { return wait_one(parent, p, login, options, out[i]); }, ignored);
  co_return out;
}

asio::awaitable<result<std::vector<node>>> wait_ready_all(tracing::action& parent, provider& p,
                                                          const std::vector<node>& nodes, const login_check& login,
                                                          const readiness_options& options, diagnostics& diag) {
  auto act = parent.child(action_types::readiness::nodes_ready, {{"nodes", nodes.size()}});
  auto outcomes = co_await wait_ready_each(act, p, nodes, login, options);
  std::vector<node> ready;
  std::vector<std::string> failures;
  error_code first;
  for (auto& o : outcomes) {
    if (!o.error) {
      ready.push_back(std::move(o.n));
      continue;
    }
    if (!first) first = o.error;
    failures.push_back(o.diag.empty() ? fmt::format("{}: {}", label(o.n), o.error.message()) : o.diag.message);
  }
  if (first) {
    diag.set(failures.size() == 1 ? failures.front()
                                  : fmt::format("{} of {} nodes are not ready: {}", failures.size(), nodes.size(),
                                                fmt::join(failures, "; ")));
    act.fail(first, diag, {{"failed", failures.size()}});
    co_return first;
  }
  act.succeed();
  co_return ready;
}

}  // namespace ferry::provision
