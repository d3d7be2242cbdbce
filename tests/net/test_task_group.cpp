// net/task_group.hpp: members end by themselves or when the group cancels them, wait() returns only once
// every one has ended (a cancelled waiter too), and a member spawned after cancel() is cancelled at once.
#include "net/cancellation.hpp"
#include "net/task_group.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace ferry::net {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// Sleeps `d` unless cancelled; records how it ended. It does not accept cancellation itself: spawn() does.
asio::awaitable<void> sleeper(std::chrono::milliseconds d, std::vector<std::string>& ends, std::string name) {
  auto ex_t = co_await asio::this_coro::executor;
  asio::steady_timer t(ex_t);
  t.expires_after(d);
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  ends.push_back(name + (ec ? ":cancelled" : ":done"));
}

asio::awaitable<void> owner(std::vector<std::string>& ends, std::size_t& running_after_short) {
  task_group group(co_await asio::this_coro::executor);
  group.spawn(sleeper(10ms, ends, "short"));
  group.spawn(sleeper(1h, ends, "long-a"));
  group.spawn(sleeper(1h, ends, "long-b"));
  auto ex_t = co_await asio::this_coro::executor;
  asio::steady_timer t(ex_t);
  t.expires_after(100ms);
  co_await t.async_wait(asio::use_awaitable);
  // The short one's end is posted: let it run first, whichever timer the reactor saw first.
  co_await asio::post(ex_t, asio::use_awaitable);
  running_after_short = group.running();
  group.cancel();
  group.spawn(sleeper(1h, ends, "late"));
  co_await group.wait();
  EXPECT_EQ(group.running(), 0u);
}

TEST(task_group, members_end_by_themselves_or_when_cancelled_and_wait_sees_them_all_end) {
  asio::io_context io;
  std::vector<std::string> ends;
  std::size_t running_after_short = 0;
  asio::co_spawn(io, owner(ends, running_after_short), asio::detached);
  io.run();  // returns once everything ended: the long sleepers were cancelled, not waited out
  EXPECT_EQ(running_after_short, 2u);
  ASSERT_EQ(ends.size(), 4u);
  EXPECT_EQ(ends[0], "short:done");
  std::sort(ends.begin() + 1, ends.end());
  EXPECT_EQ(ends[1], "late:cancelled");
  EXPECT_EQ(ends[2], "long-a:cancelled");
  EXPECT_EQ(ends[3], "long-b:cancelled");
}

// A waiter whose own work is the group's: a total cancellation of the waiter (Ctrl-C's first step) reaches
// the members with wait(true), and only a terminal one does with wait().
asio::awaitable<void> waiting_owner(bool pass_on_total, std::vector<std::string>& ends) {
  co_await accept_cancellation();
  task_group group(co_await asio::this_coro::executor);
  group.spawn(sleeper(1h, ends, "member"));
  co_await group.wait(pass_on_total);
}

std::vector<std::string> cancel_a_waiter(bool pass_on_total) {
  asio::io_context io;
  std::vector<std::string> ends;
  asio::cancellation_signal stop;
  asio::co_spawn(io, waiting_owner(pass_on_total, ends), asio::bind_cancellation_slot(stop.slot(), asio::detached));
  asio::steady_timer first(io, 50ms), second(io, 300ms);
  first.async_wait([&](auto) { stop.emit(asio::cancellation_type::total); });
  second.async_wait([&](auto) {
    ends.push_back("terminal");
    stop.emit(asio::cancellation_type::terminal);
  });
  io.run();
  return ends;
}

TEST(task_group, a_waiter_passes_on_total_cancellation_when_asked) {
  EXPECT_EQ(cancel_a_waiter(true), (std::vector<std::string>{"member:cancelled", "terminal"}));
  EXPECT_EQ(cancel_a_waiter(false), (std::vector<std::string>{"terminal", "member:cancelled"}));
}

}  // namespace
}  // namespace ferry::net
