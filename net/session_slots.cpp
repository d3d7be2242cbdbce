#include "net/session_slots.hpp"

#include "net/cancellation.hpp"

#include <boost/asio/this_coro.hpp>

#include <algorithm>

namespace ferry::net {

namespace asio = boost::asio;

session_slots::session_slots(std::size_t limit) : limit_(std::max<std::size_t>(1, limit)) {}

session_slots::permit& session_slots::permit::operator=(permit&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::move(other.owner_);
  }
  return *this;
}

void session_slots::permit::reset() {
  if (auto owner = std::move(owner_)) owner->give_back();
}

// A slot given back goes straight to the first waiter, so a newcomer cannot overtake the queue.
void session_slots::give_back() {
  if (waiting_.empty()) {
    --used_;
    return;
  }
  auto* next = waiting_.front();
  waiting_.pop_front();
  next->granted = true;
  next->wake.notify();
}

asio::awaitable<result<session_slots::permit>> session_slots::acquire() {
  if (used_ < limit_ && waiting_.empty()) {
    ++used_;
    co_return permit(shared_from_this());
  }
  waiter self{notifier(co_await asio::this_coro::executor)};
  waiting_.push_back(&self);
  error_code ec;  // `granted` says which way the wait ended
  co_await self.wake.wait(ec);
  if (self.granted) {
    // Handed over just as the caller was cancelled: it is given back, to the next in line.
    if (co_await cancelled()) {
      give_back();
      co_return error_code(asio::error::operation_aborted);
    }
    co_return permit(shared_from_this());
  }
  std::erase(waiting_, &self);
  co_return error_code(asio::error::operation_aborted);
}

}  // namespace ferry::net
