// fan_out on its own, with timers for items: every index once and never more than the limit at once;
// the first failure cancels the items in flight, starts no other and is the result, with its diagnostics;
// a caller's total cancellation (Ctrl-C's first step) reaches every item in flight.
#include "net/cancellation.hpp"
#include "net/fan_out.hpp"
#include "net/error.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <vector>

namespace ferry::net {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// What the items of one fan-out did.
struct record {
  std::vector<int> runs;        // per index: how often it started
  std::vector<bool> cancelled;  // per index: its wait was cancelled
  int in_flight = 0;
  int most_in_flight = 0;
};

// An item that waits `how_long`, then succeeds, or fails with `fail_with` when that is set.
asio::awaitable<result<void>> item(record& r, std::size_t i, std::chrono::milliseconds how_long, error_code fail_with,
                                   diagnostics& diag) {
  ++r.runs[i];
  r.most_in_flight = std::max(r.most_in_flight, ++r.in_flight);
  asio::steady_timer t(co_await asio::this_coro::executor, how_long);
  error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  --r.in_flight;
  if (ec == asio::error::operation_aborted) {
    r.cancelled[i] = true;
    co_return ec;
  }
  if (fail_with) {
    diag.set("item " + std::to_string(i) + " failed");
    co_return fail_with;
  }
  co_return result<void>{};
}

struct outcome {
  result<void> r;
  std::string diag;
};

// Runs a fan-out of `count` items, `limit` at once, where item `failing` (if any) fails after `fail_after`;
// the others take `others`. With `cancel_after`, the caller is cancelled (total) then.
outcome run(record& rec, std::size_t count, std::size_t limit, std::size_t failing,
            std::chrono::milliseconds fail_after, std::chrono::milliseconds others,
            std::chrono::milliseconds cancel_after = 0ms) {
  rec.runs.assign(count, 0);
  rec.cancelled.assign(count, false);
  asio::io_context io;
  asio::cancellation_signal signal;
  auto task = [&]() -> asio::awaitable<outcome> {
    co_await accept_cancellation();
    diagnostics diag;
    auto r = co_await fan_out(
        count, limit,
        [&](std::size_t i, diagnostics& d) {
          return i == failing ? item(rec, i, fail_after, make_error_code(errc::timeout), d)
                              : item(rec, i, others, {}, d);
        },
        diag);
    co_return outcome{r, diag.message};
  };
  auto done = asio::co_spawn(io, task(), asio::bind_cancellation_slot(signal.slot(), asio::use_future));
  asio::steady_timer canceller(io, cancel_after);
  if (cancel_after > 0ms) canceller.async_wait([&](error_code) { signal.emit(asio::cancellation_type::total); });
  io.run();
  return done.get();
}

constexpr std::size_t none = static_cast<std::size_t>(-1);

TEST(fan_out, runs_every_index_once_and_never_more_than_the_limit_at_once) {
  record rec;
  const auto o = run(rec, 20, 3, none, 0ms, 5ms);
  EXPECT_TRUE(o.r);
  EXPECT_EQ(rec.runs, std::vector<int>(20, 1));
  EXPECT_EQ(rec.most_in_flight, 3);
}

TEST(fan_out, nothing_to_do_is_success_and_a_limit_of_zero_still_runs_one) {
  record rec;
  EXPECT_TRUE(run(rec, 0, 4, none, 0ms, 5ms).r);
  EXPECT_TRUE(run(rec, 5, 0, none, 0ms, 5ms).r);
  EXPECT_EQ(rec.runs, std::vector<int>(5, 1));
  EXPECT_EQ(rec.most_in_flight, 1);
}

TEST(fan_out, the_first_failure_cancels_the_items_in_flight_starts_no_other_and_is_the_result) {
  record rec;
  // Item 1 fails after 20 ms, while items 0 and 2 would wait 10 s.
  const auto o = run(rec, 50, 3, 1, 20ms, 10s);
  ASSERT_FALSE(o.r);
  EXPECT_EQ(o.r.error(), make_error_code(errc::timeout));
  EXPECT_EQ(o.diag, "item 1 failed");
  EXPECT_TRUE(rec.cancelled[0]);
  EXPECT_TRUE(rec.cancelled[2]);
  for (std::size_t i = 3; i < 50; ++i) EXPECT_EQ(rec.runs[i], 0) << "item " << i << " started after the failure";
  EXPECT_EQ(rec.in_flight, 0);
}

TEST(fan_out, a_cancelled_caller_cancels_every_item_in_flight) {
  record rec;
  const auto o = run(rec, 10, 4, none, 0ms, 10s, 30ms);
  ASSERT_FALSE(o.r);
  EXPECT_EQ(o.r.error(), asio::error::operation_aborted);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(rec.cancelled[i]) << i;
  for (std::size_t i = 4; i < 10; ++i) EXPECT_EQ(rec.runs[i], 0) << i;
  EXPECT_EQ(rec.in_flight, 0);
}

TEST(fan_out, an_exception_from_an_item_is_a_bug_and_reaches_the_caller) {
  asio::io_context io;
  auto task = []() -> asio::awaitable<void> {
    diagnostics diag;
    co_await fan_out(
        3, 2,
        [](std::size_t i, diagnostics&) -> asio::awaitable<result<void>> {
          if (i == 1) throw std::logic_error("a bug");
          co_return result<void>{};
        },
        diag);
  };
  auto done = asio::co_spawn(io, task(), asio::use_future);
  io.run();
  EXPECT_THROW(done.get(), std::logic_error);
}

}  // namespace
}  // namespace ferry::net
