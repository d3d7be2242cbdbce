#pragma once
// Runs one coroutine on an io_context until it and everything it started are done, and returns its value
// (or rethrows what it threw): how a test body drives async code. The context is ready for the next one.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

namespace ferry::test {

template <class T>
T run_to_end(boost::asio::io_context& io, boost::asio::awaitable<T> work) {
  auto done = boost::asio::co_spawn(io, std::move(work), boost::asio::use_future);
  io.run();
  io.restart();
  return done.get();
}

}  // namespace ferry::test
