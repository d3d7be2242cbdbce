#pragma once
// Wakes whoever waits, as often as it is told: notify() ends every wait pending at that moment, and a wait
// begun later waits for the next notify(). Nothing is remembered: a notify() with nobody waiting wakes
// nobody, so a waiter looks at what it waits for before it waits (with no co_await in between).
// Waiting is an I/O wait like any other: a waiter cancelled through its slot leaves alone, with
// operation_aborted, and the others wait on. The notifier and its waiters live on one executor (the I/O
// thread): it is not for crossing threads.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdint>

namespace ferry::net {

class notifier {
 public:
  explicit notifier(boost::asio::any_io_executor io)
      : timer_(std::move(io), boost::asio::steady_timer::time_point::max()) {}

  void notify() {
    ++notifications_;
    timer_.cancel();
  }

  // Until the next notify(), or until the waiter is cancelled: which of the two, `ec` says
  // (operation_aborted either way, as Asio's timers do) no better than notifications() (taken before the
  // wait) or cancelled() do; both may come in the same turn. `ec` is the caller's, so that a wait that ends
  // after the notifier is gone (its timer's destructor cancels it) writes only into the waiter's frame.
  // The timer's own wait, not a coroutine around it: GCC 12 miscompiles some callers of such a coroutine.
  auto wait(boost::system::error_code& ec) {
    return timer_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  }

  boost::asio::any_io_executor get_executor() { return timer_.get_executor(); }

  // How many notify() calls so far: a waiter woken by something else tells them apart by it.
  std::uint64_t notifications() const { return notifications_; }

 private:
  boost::asio::steady_timer timer_;  // never expires: cancelling it ends every pending wait
  std::uint64_t notifications_ = 0;
};

}  // namespace ferry::net
