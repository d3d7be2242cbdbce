// net/notifier.hpp: notify() wakes every waiter pending then, again and again; a waiter cancelled through
// its slot leaves alone (cancelled, not woken), and the others wait on; a notify() with nobody waiting is not kept.
#include "net/notifier.hpp"

#include "net/cancellation.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

// Named: the test binaries are unity builds, and other files' helpers share these names.
namespace ferry::net::notifier_tests {
namespace {

namespace asio = boost::asio;

enum class end { woken, cancelled, neither };

// What one waiter saw, a wait after another: how each wait ended, in order.
struct waiter {
  std::vector<end> ends;
  bool waiting = false;
};

// A coroutine function, not a lambda: a lambda's captures would die with it before the coroutine ends.
asio::awaitable<void> wait_times(notifier& n, waiter& w, int times) {
  co_await accept_cancellation();
  for (int i = 0; i < times; ++i) {
    const auto seen = n.notifications();
    w.waiting = true;
    boost::system::error_code ec;
    co_await n.wait(ec);
    w.waiting = false;
    const bool stopped = co_await cancelled();
    w.ends.push_back(stopped ? end::cancelled : n.notifications() != seen ? end::woken : end::neither);
    if (stopped) co_return;
  }
}

void start(asio::io_context& io, notifier& n, waiter& w, int times = 1, asio::cancellation_signal* cancel = nullptr) {
  if (cancel) {
    asio::co_spawn(io, wait_times(n, w, times),
                   asio::bind_cancellation_slot(cancel->slot(), [](std::exception_ptr e) {
                     if (e) std::rethrow_exception(e);
                   }));
  } else {
    asio::co_spawn(io, wait_times(n, w, times), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    });
  }
}

// Runs whatever is ready, without waiting for anything (no timer expires here).
void settle(asio::io_context& io) {
  io.restart();
  io.poll();
}

TEST(notifier, notify_wakes_every_waiter) {
  asio::io_context io;
  notifier n(io.get_executor());
  std::vector<waiter> w(3);
  for (auto& one : w) start(io, n, one);
  settle(io);
  for (const auto& one : w) {
    EXPECT_TRUE(one.waiting);
    EXPECT_TRUE(one.ends.empty());
  }
  n.notify();
  settle(io);
  for (const auto& one : w) {
    EXPECT_FALSE(one.waiting);
    EXPECT_EQ(one.ends, std::vector<end>{end::woken});
  }
  EXPECT_EQ(n.notifications(), 1u);
}

TEST(notifier, wakes_again_and_again_and_only_when_notified) {
  asio::io_context io;
  notifier n(io.get_executor());
  waiter a, b;
  start(io, n, a, 3);
  start(io, n, b, 3);
  for (std::size_t round = 1; round <= 3; ++round) {
    settle(io);
    // Waiting again after each wake-up, and not woken by the notify() before.
    EXPECT_TRUE(a.waiting) << round;
    EXPECT_EQ(a.ends.size(), round - 1);
    EXPECT_EQ(b.ends.size(), round - 1);
    n.notify();
    settle(io);
    EXPECT_EQ(a.ends, std::vector<end>(round, end::woken));
    EXPECT_EQ(b.ends, std::vector<end>(round, end::woken));
  }
  EXPECT_FALSE(a.waiting);
  EXPECT_FALSE(b.waiting);
}

TEST(notifier, a_cancelled_waiter_leaves_alone_and_the_others_wait_on) {
  asio::io_context io;
  notifier n(io.get_executor());
  waiter stays, leaves;
  asio::cancellation_signal cancel;
  start(io, n, stays);
  start(io, n, leaves, 1, &cancel);
  settle(io);
  ASSERT_TRUE(leaves.waiting);
  cancel.emit(asio::cancellation_type::total);
  settle(io);
  EXPECT_EQ(leaves.ends, std::vector<end>{end::cancelled});
  EXPECT_TRUE(stays.waiting);
  EXPECT_TRUE(stays.ends.empty());
  EXPECT_EQ(n.notifications(), 0u);
  n.notify();
  settle(io);
  EXPECT_EQ(stays.ends, std::vector<end>{end::woken});
  EXPECT_EQ(leaves.ends, std::vector<end>{end::cancelled});
}

TEST(notifier, a_notify_with_nobody_waiting_is_not_kept_for_a_later_wait) {
  asio::io_context io;
  notifier n(io.get_executor());
  n.notify();
  settle(io);
  waiter late;
  start(io, n, late);
  settle(io);
  EXPECT_TRUE(late.waiting);
  EXPECT_TRUE(late.ends.empty());
  n.notify();
  settle(io);
  EXPECT_EQ(late.ends, std::vector<end>{end::woken});
}

// A session that ends while someone waits on it (ssh_session's wake-ups): the wait ends, and writes only into
// its own frame, not into the notifier that is gone.
asio::awaitable<void> wait_once(notifier& n, boost::system::error_code& ec, bool& ended) {
  co_await n.wait(ec);
  ended = true;
}

TEST(notifier, a_notifier_may_end_while_one_waits) {
  asio::io_context io;
  auto n = std::make_unique<notifier>(io.get_executor());
  boost::system::error_code ec;
  bool ended = false;
  asio::co_spawn(io, wait_once(*n, ec, ended), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  settle(io);
  ASSERT_FALSE(ended);
  n.reset();
  settle(io);
  EXPECT_TRUE(ended);
  EXPECT_EQ(ec, asio::error::operation_aborted);
}

}  // namespace
}  // namespace ferry::net::notifier_tests
