#include "net/task_group.hpp"

#include "net/cancellation.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <cstdlib>
#include <exception>

namespace ferry::net {

namespace asio = boost::asio;

task_group::task_group(asio::any_io_executor io) : io_(io), ended_(io) {}

task_group::~task_group() {
  if (!signals_.empty()) std::abort();
}

void task_group::spawn(asio::awaitable<void> work) {
  auto it = signals_.emplace(signals_.end());
  // Accepting total cancellation here, so that no member has to remember to (cancel() emits total).
  asio::co_spawn(io_, cancellation_detail::accepting(std::move(work)), asio::bind_cancellation_slot(it->slot(), [this, it](std::exception_ptr e) {
                   if (e) std::rethrow_exception(e);
                   // Later, not here: this may run inside cancel()'s loop over the signals.
                   asio::post(io_, [this, it] {
                     signals_.erase(it);
                     ended_.notify();
                   });
                 }));
  if (cancelled_) it->emit(asio::cancellation_type::total);
}

void task_group::cancel() {
  cancelled_ = true;
  for (auto& s : signals_) s.emit(asio::cancellation_type::total);
}

asio::awaitable<void> task_group::wait(bool pass_on_total) {
  // A cancelled wait only waits again: the members must end first. A caller cut off (terminal
  // cancellation: the grace after Ctrl-C is over) cuts them off too, so that none outlives it.
  bool cut_off = false;
  while (!signals_.empty()) {
    boost::system::error_code ec;  // woken or cancelled: the loop looks again either way
    co_await ended_.wait(ec);
    const auto state = co_await asio::this_coro::cancellation_state;
    if (!cut_off && is_terminal(state.cancelled())) {
      cut_off = true;
      for (auto& s : signals_) s.emit(asio::cancellation_type::terminal);
    } else if (pass_on_total && !cancelled_ &&
               (state.cancelled() & asio::cancellation_type::total) != asio::cancellation_type::none) {
      cancel();
    }
  }
}

}  // namespace ferry::net
