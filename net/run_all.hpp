#pragma once
// Runs coroutines side by side on the caller's executor and waits for every one of them. Cancelling
// the caller cancels them all (total cancellation reaches each, so each can wind down and end its
// actions); a caller cancelled before the call starts them cancelled (net::started_cancelled). Nothing
// is left running: the caller owns what it started. An exception (a bug) in any of them is rethrown once
// all have finished.
#include <boost/asio/awaitable.hpp>

#include <vector>

namespace ferry::net {

boost::asio::awaitable<void> run_all(std::vector<boost::asio::awaitable<void>> tasks);

}  // namespace ferry::net
