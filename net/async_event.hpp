#pragma once
// A one-shot event coroutines can wait for: set() once, and every waiter (now or later) goes on. Waiting
// is an I/O wait like any other, so cancelling the waiter ends it with operation_aborted. The event and
// its waiters live on one executor (the I/O thread): it is not for crossing threads.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace ferry::net {

class async_event {
 public:
  explicit async_event(boost::asio::any_io_executor io) : timer_(std::move(io)) {
    timer_.expires_at(boost::asio::steady_timer::time_point::max());
  }

  void set() {
    set_ = true;
    timer_.cancel();
  }
  bool is_set() const { return set_; }

  // Empty once set; operation_aborted when the waiter was cancelled first.
  boost::asio::awaitable<boost::system::error_code> wait() {
    while (!set_) {
      boost::system::error_code ec;
      co_await timer_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      if (!set_) co_return boost::asio::error::operation_aborted;
    }
    co_return boost::system::error_code{};
  }

 private:
  boost::asio::steady_timer timer_;  // never expires: set() cancels it to wake every waiter
  bool set_ = false;
};

}  // namespace ferry::net
