// with_deadline on its own, with timers for operations: the result when the operation ends first,
// nothing when the deadline does (and the operation is cancelled, not left running), and a caller's total
// cancellation (Ctrl-C's first step) answered at once rather than after the deadline.
#include "net/cancellation.hpp"
#include "net/deadline.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include <chrono>

namespace ferry::net {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

// An operation that takes `how_long` and says how it ended: 7 when it ran out its time, -1 when cancelled.
asio::awaitable<int> sleeper(clock::duration how_long, bool& cancelled_seen) {
  asio::steady_timer t(co_await asio::this_coro::executor, how_long);
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  cancelled_seen = ec == asio::error::operation_aborted;
  co_return cancelled_seen ? -1 : 7;
}

template <typename T>
T run(asio::awaitable<T> task, asio::cancellation_signal* signal = nullptr, clock::duration cancel_after = {}) {
  asio::io_context io;
  asio::cancellation_signal none;
  auto& s = signal ? *signal : none;
  auto done = asio::co_spawn(io, std::move(task), asio::bind_cancellation_slot(s.slot(), asio::use_future));
  asio::steady_timer canceller(io, cancel_after);
  if (signal) canceller.async_wait([&](boost::system::error_code) { s.emit(asio::cancellation_type::total); });
  io.run();
  return done.get();
}

asio::awaitable<std::optional<int>> raced(clock::duration op, clock::duration limit, bool& seen) {
  co_await accept_cancellation();
  co_return co_await with_deadline(sleeper(op, seen), limit);
}

TEST(with_deadline, the_result_when_the_operation_ends_first) {
  bool seen = false;
  EXPECT_EQ(run(raced(10ms, 5s, seen)), std::optional<int>(7));
  EXPECT_FALSE(seen);
}

TEST(with_deadline, nothing_when_the_deadline_comes_first_and_the_operation_is_cancelled) {
  bool seen = false;
  const auto start = clock::now();
  EXPECT_EQ(run(raced(30s, 50ms, seen)), std::nullopt);
  EXPECT_TRUE(seen) << "the operation was not cancelled";
  EXPECT_LT(clock::now() - start, 10s);
}

TEST(with_deadline, a_total_cancellation_of_the_caller_reaches_the_operation_at_once) {
  bool seen = false;
  asio::cancellation_signal signal;
  const auto start = clock::now();
  const auto r = run(raced(30s, 20s, seen), &signal, 50ms);
  // Whichever side ended first, the caller is answered long before either 20 s deadline or 30 s sleep.
  EXPECT_LT(clock::now() - start, 10s);
  EXPECT_TRUE(seen) << "the operation never heard the cancellation";
  if (r) {
    EXPECT_EQ(*r, -1);
  }
}

asio::awaitable<bool> raced_void(clock::duration op, clock::duration limit) {
  co_await accept_cancellation();
  bool seen = false;
  auto ignore_result = [](asio::awaitable<int> a) -> asio::awaitable<void> { (void)co_await std::move(a); };
  co_return co_await with_deadline(ignore_result(sleeper(op, seen)), limit);
}

TEST(with_deadline, an_operation_without_a_result_says_whether_it_ended_in_time) {
  EXPECT_TRUE(run(raced_void(10ms, 5s)));
  EXPECT_FALSE(run(raced_void(30s, 50ms)));
}

}  // namespace
}  // namespace ferry::net
