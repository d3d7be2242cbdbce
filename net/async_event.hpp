#pragma once
// A one-shot event coroutines can wait for: set() once, and every waiter (now or later) goes on. Waiting
// is an I/O wait like any other, so cancelling the waiter ends it with operation_aborted. The event and
// its waiters live on one executor (the I/O thread): it is not for crossing threads.
#include "net/notifier.hpp"

#include <boost/asio/error.hpp>

namespace ferry::net {

class async_event {
 public:
  explicit async_event(boost::asio::any_io_executor io) : changed_(std::move(io)) {}

  void set() {
    set_ = true;
    changed_.notify();
  }
  bool is_set() const { return set_; }

  // Empty once set; operation_aborted when the waiter was cancelled first.
  boost::asio::awaitable<boost::system::error_code> wait() {
    boost::system::error_code ec;
    if (!set_) co_await changed_.wait(ec);
    if (!set_) co_return boost::asio::error::operation_aborted;
    co_return boost::system::error_code{};
  }

 private:
  notifier changed_;
  bool set_ = false;
};

}  // namespace ferry::net
