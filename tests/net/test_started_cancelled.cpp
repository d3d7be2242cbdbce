// Work that a coroutine starts after its cancellation came. Asio records a cancellation in the
// coroutine's state but hands it only to the operation in flight at that moment, so a run_all, a fan_out
// or a deadline begun afterwards would run on as if nothing had happened (a map's node set-up cancelled
// during its watchdog's install went on to start its tasks). Here each one starts cancelled: its tasks
// see cancelled() from their first step, their first wait ends at once, and fan_out starts no item.
#include "net/cancellation.hpp"
#include "net/deadline.hpp"
#include "net/fan_out.hpp"
#include "net/run_all.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <vector>

namespace ferry::net {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// How long a wait that only a cancellation should end runs at most: work that missed its cancellation
// then ends the test with a failure rather than hang it.
constexpr auto uncut_bound = 20s;

// A wait that only a cancellation ends early; whether it did.
asio::awaitable<bool> long_wait_cut() {
  asio::steady_timer t(co_await asio::this_coro::executor, uncut_bound);
  error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return ec == asio::error::operation_aborted;
}

// Runs `after` in a coroutine whose first wait was cut by a total cancellation (Ctrl-C's first step),
// which has therefore already been handed out when `after` begins.
template <class T>
T after_a_cancellation(std::function<asio::awaitable<T>()> after) {
  asio::io_context io;
  asio::cancellation_signal signal;
  auto task = [&]() -> asio::awaitable<T> {
    co_await accept_cancellation();
    EXPECT_TRUE(co_await long_wait_cut());
    co_return co_await after();
  };
  auto done = asio::co_spawn(io, task(), asio::bind_cancellation_slot(signal.slot(), asio::use_future));
  asio::post(io, [&] { signal.emit(asio::cancellation_type::total); });
  io.run();
  return done.get();
}

struct seen {
  bool cancelled_at_start = false;
  bool wait_cut = false;
};

asio::awaitable<void> task(seen& s) {
  s.cancelled_at_start = co_await cancelled();
  s.wait_cut = co_await long_wait_cut();
}

TEST(started_cancelled, run_all_begun_after_the_cancellation_starts_its_tasks_cancelled) {
  std::vector<seen> seen_by(3);
  after_a_cancellation<int>([&]() -> asio::awaitable<int> {
    std::vector<asio::awaitable<void>> tasks;
    for (auto& s : seen_by) tasks.push_back(task(s));
    co_await run_all(std::move(tasks));
    co_return 0;
  });
  for (const auto& s : seen_by) {
    EXPECT_TRUE(s.cancelled_at_start);
    EXPECT_TRUE(s.wait_cut);
  }
}

TEST(started_cancelled, a_task_of_run_all_that_starts_another_run_all_passes_it_on) {
  std::vector<seen> inner(2);
  after_a_cancellation<int>([&]() -> asio::awaitable<int> {
    auto nested = [&]() -> asio::awaitable<void> {
      std::vector<asio::awaitable<void>> tasks;
      for (auto& s : inner) tasks.push_back(task(s));
      co_await run_all(std::move(tasks));
    };
    std::vector<asio::awaitable<void>> outer;
    outer.push_back(nested());
    co_await run_all(std::move(outer));
    co_return 0;
  });
  for (const auto& s : inner) {
    EXPECT_TRUE(s.cancelled_at_start);
    EXPECT_TRUE(s.wait_cut);
  }
}

TEST(started_cancelled, fan_out_begun_after_the_cancellation_starts_no_item) {
  int started = 0;
  const auto r = after_a_cancellation<result<void>>([&]() -> asio::awaitable<result<void>> {
    diagnostics diag;
    co_return co_await fan_out(
        4, 2,
        [&](std::size_t, diagnostics&) -> asio::awaitable<result<void>> {
          ++started;
          co_await long_wait_cut();
          co_return result<void>{};
        },
        diag);
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), asio::error::operation_aborted);
  EXPECT_EQ(started, 0);
}

TEST(started_cancelled, a_deadline_begun_after_the_cancellation_cuts_its_operation) {
  const auto cut = after_a_cancellation<bool>([&]() -> asio::awaitable<bool> {
    auto r = co_await with_deadline(long_wait_cut(), std::chrono::steady_clock::now() + 2h);
    co_return r.value_or(false);
  });
  EXPECT_TRUE(cut);
}

TEST(started_cancelled, a_caller_not_cancelled_runs_its_tasks_as_usual) {
  asio::io_context io;
  std::vector<seen> seen_by(2);
  auto body = [&]() -> asio::awaitable<void> {
    co_await accept_cancellation();
    std::vector<asio::awaitable<void>> tasks;
    for (auto& s : seen_by) tasks.push_back([](seen& s) -> asio::awaitable<void> {
      s.cancelled_at_start = co_await cancelled();
      asio::steady_timer t(co_await asio::this_coro::executor, 1ms);
      error_code ec;
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      s.wait_cut = ec == asio::error::operation_aborted;
    }(s));
    co_await run_all(std::move(tasks));
  };
  auto done = asio::co_spawn(io, body(), asio::use_future);
  io.run();
  done.get();
  for (const auto& s : seen_by) {
    EXPECT_FALSE(s.cancelled_at_start);
    EXPECT_FALSE(s.wait_cut);
  }
}

}  // namespace
}  // namespace ferry::net
