#include "net/exec_streams.hpp"

#include "net/error.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstring>

namespace ferry::net {

boost::asio::awaitable<error_code> collect_sink::write(output_stream stream, std::span<const char> bytes) {
  if (out.size() + err.size() + bytes.size() > max_bytes_) co_return make_error_code(errc::output_too_large);
  (stream == output_stream::out ? out : err).append(bytes.data(), bytes.size());
  co_return error_code{};
}

boost::asio::awaitable<error_code> callback_sink::write(output_stream stream, std::span<const char> bytes) {
  f_(stream, std::string_view(bytes.data(), bytes.size()));
  co_return error_code{};
}

stream_source::stream_source(boost::asio::any_io_executor io) : arrived_(std::move(io)) {}

void stream_source::write(std::string_view bytes) {
  queued_.append(bytes);
  notify();
}

void stream_source::close() {
  closed_ = true;
  notify();
}

void stream_source::notify() {
  arrived_.notify();
  if (wake_) wake_();
}

boost::asio::awaitable<result<std::size_t>> stream_source::read(std::span<char> into) {
  while (!ready()) {
    error_code ec;
    co_await arrived_.wait(ec);
    if (!ready()) co_return error_code(boost::asio::error::operation_aborted);
  }
  const auto n = std::min(into.size(), queued_.size());
  std::memcpy(into.data(), queued_.data(), n);
  queued_.erase(0, n);
  co_return n;
}

boost::asio::awaitable<result<std::size_t>> buffer_source::read(std::span<char> into) {
  const auto n = std::min(into.size(), rest_.size());
  std::memcpy(into.data(), rest_.data(), n);
  rest_.remove_prefix(n);
  co_return n;
}

}  // namespace ferry::net
