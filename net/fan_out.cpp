#include "net/fan_out.hpp"

#include "net/cancellation.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <vector>

namespace ferry::net {
namespace {

namespace asio = boost::asio;

struct fan_out_state {
  std::size_t count = 0;
  fan_out_item item;
  std::size_t next = 0;
  error_code first;
  diagnostics diag;
};

// Takes the next index until none is left or an item failed.
asio::awaitable<void> worker(fan_out_state& s) {
  co_await accept_cancellation();
  while (!s.first && s.next < s.count) {
    const auto i = s.next++;
    diagnostics d;
    auto r = co_await s.item(i, d);
    if (!r) {
      // The first failure is the one to tell: those it cancels only fail because of it.
      if (!s.first) {
        s.first = r.error();
        s.diag = std::move(d);
      }
      co_return;
    }
    if (co_await cancelled()) co_return;
  }
}

// Asked as each worker ends: once an item failed, the others are cancelled.
struct first_failure_cancels_the_rest {
  const fan_out_state* s;
  asio::cancellation_type_t operator()(const std::exception_ptr& e) const {
    return e || s->first ? asio::cancellation_type::total : asio::cancellation_type::none;
  }
};

}  // namespace

asio::awaitable<result<void>> fan_out(std::size_t count, std::size_t limit, fan_out_item item, diagnostics& diag) {
  if (count == 0) co_return result<void>{};
  // A caller cancelled before the call starts no item: it is cancelled already.
  if (co_await cancelled()) co_return error_code(asio::error::operation_aborted);
  fan_out_state s;
  s.count = count;
  s.item = std::move(item);
  auto ex = co_await asio::this_coro::executor;
  using op = decltype(asio::co_spawn(ex, std::declval<asio::awaitable<void>>(), asio::deferred));
  std::vector<op> ops;
  const auto workers = std::min(count, std::max<std::size_t>(1, limit));
  ops.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) ops.push_back(asio::co_spawn(ex, worker(s), asio::deferred));
  auto [order, errors] = co_await asio::experimental::make_parallel_group(std::move(ops))
                             .async_wait(first_failure_cancels_the_rest{&s}, asio::use_awaitable);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  if (s.first) {
    diag = std::move(s.diag);
    co_return s.first;
  }
  if (co_await cancelled()) co_return error_code(asio::error::operation_aborted);
  co_return result<void>{};
}

}  // namespace ferry::net
