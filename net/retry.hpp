#pragma once
// The one retry helper of the project: full-jitter exponential backoff (a random wait between zero and
// min(max_delay, base_delay * 2^(attempt-1))), a predicate for what is worth another attempt, a
// Retry-After hint from the server honoured, attempts capped from config, and every attempt a traced
// action of its own, so a trace shows each try and why it failed.
#include "config/settings.hpp"
#include "net/cancellation.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <optional>
#include <string_view>

namespace ferry::net {

// What one attempt tells the helper besides its result.
struct attempt_info {
  int number = 1;  // 1 for the first attempt
  std::optional<std::chrono::milliseconds> retry_after;  // the server's Retry-After, if any
  diagnostics diag;
};

// Connection failures, timeouts, 500/502/503/504, 429 and S3's SlowDown. Never a failed precondition of
// a conditional write (errc::precondition_failed): sent again it fails again; the caller must read first.
bool is_retryable(const error_code& ec);

// The wait before attempt `next` (2 for the first retry), before any Retry-After hint.
std::chrono::milliseconds backoff_delay(const config::retry_settings& policy, int next);

// Runs `attempt(action&, attempt_info&)` -> awaitable<result<T>> until it succeeds, fails with an error
// that `retryable` rejects, or the attempts run out. Each attempt is a child action `action_type` of
// `parent` with field "attempt". The last attempt's diagnostics end up in `diag`.
template <class T, class Attempt, class Retryable>
boost::asio::awaitable<result<T>> with_retry(tracing::action& parent, std::string_view action_type,
                                             const config::retry_settings& policy, Attempt attempt,
                                             Retryable retryable, diagnostics& diag) {
  const int max_attempts = std::max(1, policy.max_attempts);
  for (int n = 1;; ++n) {
    if (n > 1 && co_await cancelled()) co_return error_code(boost::asio::error::operation_aborted);
    attempt_info info;
    info.number = n;
    auto act = parent.child(action_type, {{"attempt", n}});
    result<T> r = co_await attempt(act, info);
    if (r) {
      act.succeed();
      co_return r;
    }
    diag = std::move(info.diag);
    if (n == max_attempts || !retryable(r.error())) {
      act.fail(r.error(), diag);
      co_return r;
    }
    auto wait = backoff_delay(policy, n + 1);
    if (info.retry_after) wait = std::max(wait, *info.retry_after);
    act.fail(r.error(), diag, {{"retry_in_ms", static_cast<std::int64_t>(wait.count())}});
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, wait);
    error_code ec;
    co_await timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    if (ec) co_return ec;  // cancelled while waiting
  }
}

// The same with is_retryable as the predicate.
template <class T, class Attempt>
boost::asio::awaitable<result<T>> with_retry(tracing::action& parent, std::string_view action_type,
                                             const config::retry_settings& policy, Attempt attempt,
                                             diagnostics& diag) {
  return with_retry<T>(parent, action_type, policy, std::move(attempt),
                       [](const error_code& ec) { return is_retryable(ec); }, diag);
}

}  // namespace ferry::net
