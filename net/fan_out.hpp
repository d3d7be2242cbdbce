#pragma once
// The one bounded fan-out: item(0) .. item(count - 1), at most `limit` at once, on the caller's executor.
// The first item to fail ends it: no further item starts, the ones in flight are cancelled (total
// cancellation, so each ends its actions as cancelled), and that first failure, with its diagnostics, is
// the result. Cancelling the caller cancels them all, and a caller cancelled before the call starts none;
// the result is then operation_aborted. Work whose items must all run whatever the others do keeps each
// outcome itself and returns success.
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <functional>

namespace ferry::net {

using fan_out_item = std::function<boost::asio::awaitable<result<void>>(std::size_t index, diagnostics& diag)>;

boost::asio::awaitable<result<void>> fan_out(std::size_t count, std::size_t limit, fan_out_item item,
                                             diagnostics& diag);

}  // namespace ferry::net
