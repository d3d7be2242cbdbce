#include "net/run_all.hpp"

#include "net/cancellation.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace ferry::net {
namespace {

namespace asio = boost::asio;

// A task started by a caller that was cancelled already starts cancelled: it is one of "them all".
asio::awaitable<void> accepting_total_cancellation(asio::awaitable<void> task, bool stopped) {
  co_await accept_cancellation();
  if (stopped) co_return co_await started_cancelled(std::move(task));
  co_await std::move(task);
}

}  // namespace

asio::awaitable<void> run_all(std::vector<asio::awaitable<void>> tasks) {
  if (tasks.empty()) co_return;
  auto ex = co_await asio::this_coro::executor;
  const bool stopped = co_await cancelled();
  using op = decltype(asio::co_spawn(ex, std::declval<asio::awaitable<void>>(), asio::deferred));
  std::vector<op> ops;
  ops.reserve(tasks.size());
  for (auto& t : tasks) ops.push_back(asio::co_spawn(ex, accepting_total_cancellation(std::move(t), stopped), asio::deferred));
  auto [order, errors] = co_await asio::experimental::make_parallel_group(std::move(ops))
                             .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace ferry::net
