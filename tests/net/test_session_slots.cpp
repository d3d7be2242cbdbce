// ssh.max_sessions as a pool: slots go to callers first come first served, a slot given back goes to the
// first waiter, and a waiter that is cancelled leaves the queue (or passes on a slot it was just handed).
#include "net/session_slots.hpp"

#include "net/cancellation.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace ferry::net {
namespace {

namespace asio = boost::asio;

struct taker {
  std::optional<result<session_slots::permit>> got;
};

// A coroutine function, not a lambda: a lambda's captures would die with it before the coroutine ends.
asio::awaitable<void> acquire_into(session_slots& slots, taker& t) {
  co_await accept_cancellation();
  t.got.emplace(co_await slots.acquire());
}

void take(asio::io_context& io, session_slots& slots, taker& t, asio::cancellation_signal* cancel = nullptr) {
  if (cancel) {
    asio::co_spawn(io, acquire_into(slots, t), asio::bind_cancellation_slot(cancel->slot(), [](std::exception_ptr) {}));
  } else {
    asio::co_spawn(io, acquire_into(slots, t), [](std::exception_ptr) {});
  }
}

void settle(asio::io_context& io) {
  io.restart();
  io.poll();
}

TEST(session_slots, give_out_up_to_the_limit_then_first_come_first_served) {
  asio::io_context io;
  auto slots = std::make_shared<session_slots>(2);
  std::vector<taker> t(5);
  for (auto& one : t) take(io, *slots, one);
  settle(io);
  ASSERT_TRUE(t[0].got && *t[0].got);
  ASSERT_TRUE(t[1].got && *t[1].got);
  for (int i = 2; i < 5; ++i) EXPECT_FALSE(t[i].got) << i;
  EXPECT_EQ(slots->in_use(), 2u);
  EXPECT_EQ(slots->waiting(), 3u);

  (*t[1].got)->reset();  // given back: the first waiter has it, not a newcomer
  taker late;
  take(io, *slots, late);
  settle(io);
  ASSERT_TRUE(t[2].got && *t[2].got);
  EXPECT_FALSE(t[3].got);
  EXPECT_FALSE(late.got);
  EXPECT_EQ(slots->in_use(), 2u);

  t[0].got.reset();  // the permit's end gives the slot back too
  settle(io);
  ASSERT_TRUE(t[3].got && *t[3].got);
  EXPECT_FALSE(t[4].got);
}

TEST(session_slots, a_cancelled_waiter_leaves_the_queue_and_takes_nothing) {
  asio::io_context io;
  auto slots = std::make_shared<session_slots>(1);
  taker first, cancelled, third;
  asio::cancellation_signal cancel;
  take(io, *slots, first);
  take(io, *slots, cancelled, &cancel);
  take(io, *slots, third);
  settle(io);
  EXPECT_EQ(slots->waiting(), 2u);
  cancel.emit(asio::cancellation_type::terminal);
  settle(io);
  ASSERT_TRUE(cancelled.got);
  ASSERT_FALSE(*cancelled.got);
  EXPECT_EQ(cancelled.got->error(), asio::error::operation_aborted);
  EXPECT_EQ(slots->waiting(), 1u);
  first.got.reset();
  settle(io);
  ASSERT_TRUE(third.got && *third.got);
  EXPECT_EQ(slots->in_use(), 1u);
  third.got.reset();
  EXPECT_EQ(slots->in_use(), 0u);
}

TEST(session_slots, a_slot_handed_to_a_waiter_cancelled_meanwhile_goes_to_the_next) {
  asio::io_context io;
  auto slots = std::make_shared<session_slots>(1);
  taker first, second, third;
  asio::cancellation_signal cancel;
  take(io, *slots, first);
  take(io, *slots, second, &cancel);
  take(io, *slots, third);
  settle(io);
  // Both in one turn of the loop: the cancellation (which co_spawn delivers through the executor) is on
  // its way when the slot is handed over, so the waiter wakes holding a slot it no longer wants.
  cancel.emit(asio::cancellation_type::terminal);
  first.got.reset();
  settle(io);
  ASSERT_TRUE(second.got);
  EXPECT_FALSE(*second.got);
  ASSERT_TRUE(third.got && *third.got);
  EXPECT_EQ(slots->in_use(), 1u);
}

}  // namespace
}  // namespace ferry::net
