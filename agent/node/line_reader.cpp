#include "agent/node/line_reader.hpp"

#include "agent/node/error.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <unistd.h>

namespace ferry::agent::node {

namespace asio = boost::asio;

line_reader::line_reader(asio::any_io_executor io, int fd) : in_(std::move(io), ::dup(fd)) {}

std::optional<std::string> line_reader::take_line() {
  const auto nl = buffer_.find('\n');
  if (nl == std::string::npos) {
    if (!eof_ || buffer_.empty()) return std::nullopt;
    return std::exchange(buffer_, {});  // a last line without its newline
  }
  auto line = buffer_.substr(0, nl);
  buffer_.erase(0, nl + 1);
  return line;
}

error_code line_reader::too_long(diagnostics& diag) const {
  diag.set(fmt::format("a plan line is over {} bytes", max_line));
  return make_error_code(errc::bad_plan);
}

asio::awaitable<result<std::optional<std::string>>> line_reader::next(diagnostics& diag) {
  char chunk[1 << 16];
  for (;;) {
    if (auto line = take_line()) co_return line;
    if (eof_) co_return std::optional<std::string>();
    if (cancelled_) co_return error_code(asio::error::operation_aborted);
    if (buffer_.size() > max_line) co_return too_long(diag);
    error_code ec;
    const auto n = co_await in_.async_read_some(asio::buffer(chunk), asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::eof) {
      eof_ = true;
    } else if (ec) {
      if (ec == asio::error::operation_aborted) co_return ec;
      diag.set(fmt::format("reading the plan from stdin: {}", ec.message()));
      co_return make_error_code(errc::bad_plan);
    }
    buffer_.append(chunk, n);
  }
}

void line_reader::cancel() {
  cancelled_ = true;
  error_code ignored;
  in_.cancel(ignored);
}

}  // namespace ferry::agent::node
