#pragma once
// The one place ferry races an operation with a timer. Asio's `a || b` co_spawns its operands, and a
// spawned coroutine hears only terminal cancellation unless it accepts more: written inline, the race
// ignores the total cancellation of Ctrl-C's first step and waits out the timer instead. Here both sides
// accept it, so a cancelled caller is answered at once (one cancelled before the call too), and when the
// deadline comes first the operation is cancelled (terminal) and waited for before this returns.
#include "net/cancellation.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <optional>
#include <utility>

namespace ferry::net {

namespace deadline_detail {

template <typename T>
boost::asio::awaitable<T> accepting(boost::asio::awaitable<T> op) {
  co_await accept_cancellation();
  co_return co_await std::move(op);
}

inline boost::asio::awaitable<void> expiry(boost::asio::steady_timer& timer) {
  co_await accept_cancellation();
  boost::system::error_code ignored;  // cancelled or expired: either way the race is decided
  co_await timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ignored));
}

}  // namespace deadline_detail

// `op`'s result, or nullopt when `deadline` came first. A cancelled caller gets whatever `op` returns on
// cancellation (it ends first, as the timer does), so callers ask cancelled() before they read a timeout.
template <typename T>
boost::asio::awaitable<std::optional<T>> with_deadline(boost::asio::awaitable<T> op,
                                                       std::chrono::steady_clock::time_point deadline) {
  using namespace boost::asio::experimental::awaitable_operators;
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, deadline);
  auto race = deadline_detail::accepting(std::move(op)) || deadline_detail::expiry(timer);
  auto first = co_await carrying_cancellation(std::move(race));
  if (first.index() == 1) co_return std::nullopt;
  co_return std::optional<T>(std::get<0>(std::move(first)));
}

// For an operation without a result: true when it ended before the deadline.
inline boost::asio::awaitable<bool> with_deadline(boost::asio::awaitable<void> op,
                                                  std::chrono::steady_clock::time_point deadline) {
  using namespace boost::asio::experimental::awaitable_operators;
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, deadline);
  auto race = deadline_detail::accepting(std::move(op)) || deadline_detail::expiry(timer);
  auto first = co_await carrying_cancellation(std::move(race));
  co_return first.index() == 0;
}

template <typename Op, typename Rep, typename Period>
auto with_deadline(Op op, std::chrono::duration<Rep, Period> limit) {
  return with_deadline(std::move(op), std::chrono::steady_clock::now() + limit);
}

}  // namespace ferry::net
