#pragma once
// CPU work (hashing, deflate, parsing big files) runs on a thread pool so the io_context thread only
// ever waits on I/O. offload() is the one way onto the pool: it runs `f` there and resumes the awaiting
// coroutine back on its own executor with the result (or the exception `f` threw).
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

namespace ferry::net {

namespace asio = boost::asio;

class cpu_pool {
 public:
  // threads == 0: one per core.
  explicit cpu_pool(std::size_t threads = 0)
      : pool_(threads ? threads : std::max(1u, std::thread::hardware_concurrency())) {}
  ~cpu_pool() { pool_.join(); }
  cpu_pool(const cpu_pool&) = delete;
  cpu_pool& operator=(const cpu_pool&) = delete;

  asio::thread_pool::executor_type executor() { return pool_.get_executor(); }

 private:
  asio::thread_pool pool_;
};

namespace detail {

template <class T>
struct offload_signature {
  using type = void(std::exception_ptr, std::optional<T>);
};
template <>
struct offload_signature<void> {
  using type = void(std::exception_ptr);
};

}  // namespace detail

template <class F>
asio::awaitable<std::invoke_result_t<F>> offload(cpu_pool& pool, F f) {
  using T = std::invoke_result_t<F>;
  using signature = typename detail::offload_signature<T>::type;
  auto initiation =
      [&pool](auto handler, F fn) {
        asio::post(pool.executor(), [handler = std::move(handler), fn = std::move(fn)]() mutable {
          auto home = asio::get_associated_executor(handler);
          std::exception_ptr error;
          if constexpr (std::is_void_v<T>) {
            try {
              fn();
            } catch (...) {
              error = std::current_exception();
            }
            asio::dispatch(home, [handler = std::move(handler), error]() mutable { std::move(handler)(error); });
          } else {
            std::optional<T> value;
            try {
              value.emplace(fn());
            } catch (...) {
              error = std::current_exception();
            }
            asio::dispatch(home, [handler = std::move(handler), error, value = std::move(value)]() mutable {
              std::move(handler)(error, std::move(value));
            });
          }
        });
      };
  if constexpr (std::is_void_v<T>) {
    co_await asio::async_initiate<const asio::use_awaitable_t<>, signature>(initiation, asio::use_awaitable,
                                                                            std::move(f));
  } else {
    auto value = co_await asio::async_initiate<const asio::use_awaitable_t<>, signature>(
        initiation, asio::use_awaitable, std::move(f));
    co_return std::move(*value);
  }
}

}  // namespace ferry::net
