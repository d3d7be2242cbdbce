#pragma once
// Test helper: runs one coroutine to its end on a fresh io_context.
#include "net/cancellation.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

namespace ferry::test {

template <class T>
boost::asio::awaitable<T> accepting_cancellation(boost::asio::awaitable<T> task) {
  co_await net::accept_cancellation();
  co_return co_await std::move(task);
}

template <class T>
T run_io(boost::asio::awaitable<T> task) {
  boost::asio::io_context io;
  auto done = boost::asio::co_spawn(io, accepting_cancellation(std::move(task)), boost::asio::use_future);
  io.run();
  return done.get();
}

}  // namespace ferry::test
