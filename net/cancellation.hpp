#pragma once
// How ferry's coroutines see cancellation. Asio's default is to accept only terminal cancellation and
// to throw from the next co_await once cancelled; ferry treats cancellation as an expected failure
// instead: every coroutine thread accepts total cancellation (Ctrl-C's first step) and gets
// operation_aborted as an error code from the operation it was waiting on. Work that runs between
// operations (a hash on the CPU pool) is not interrupted, so loops ask cancelled() before each new step.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/channel_error.hpp>
#include <boost/asio/this_coro.hpp>

namespace ferry::net {

// Channels report a cancelled wait as channel_cancelled; ferry speaks of it as operation_aborted.
inline boost::system::error_code as_cancellation(boost::system::error_code ec) {
  if (ec == boost::asio::experimental::channel_errc::channel_cancelled) return boost::asio::error::operation_aborted;
  return ec;
}

// Call first in every coroutine started with co_spawn.
inline boost::asio::awaitable<void> accept_cancellation() {
  co_await boost::asio::this_coro::reset_cancellation_state(boost::asio::enable_total_cancellation());
  co_await boost::asio::this_coro::throw_if_cancelled(false);
}

// Whether this coroutine thread has been asked to stop.
inline boost::asio::awaitable<bool> cancelled() {
  auto state = co_await boost::asio::this_coro::cancellation_state;
  co_return state.cancelled() != boost::asio::cancellation_type::none;
}

}  // namespace ferry::net
