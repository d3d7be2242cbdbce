#include "provision/ssh_banner.hpp"

#include "net/cancellation.hpp"
#include "net/deadline.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <array>

namespace ferry::provision {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// RFC 4253 caps the identification line at 255 bytes; lines before it are rare and short. Past this much
// the peer is not an SSH server.
constexpr std::size_t max_greeting = 8192;

auto on_error(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

std::string where(const node& n) { return fmt::format("{} ({}:{})", n.name.empty() ? n.id : n.name, n.host, n.port); }

asio::awaitable<error_code> resolve_and_connect(tcp::socket& socket, const node& n) {
  co_await net::accept_cancellation();
  error_code ec;
  tcp::resolver resolver(socket.get_executor());
  const auto port = std::to_string(n.port);
  const auto endpoints = co_await resolver.async_resolve(n.host, port, on_error(ec));
  if (ec) co_return ec;
  co_await asio::async_connect(socket, endpoints, on_error(ec));
  co_return ec;
}

// Reads until a complete identification line has arrived; `greeting` holds everything read.
asio::awaitable<error_code> read_banner(tcp::socket& socket, std::string& greeting, std::string& line) {
  co_await net::accept_cancellation();
  std::array<char, 512> buf;
  for (;;) {
    std::size_t start = 0;
    for (auto nl = greeting.find('\n'); nl != std::string::npos; nl = greeting.find('\n', start)) {
      line = greeting.substr(start, nl - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.starts_with("SSH-")) co_return error_code{};
      start = nl + 1;
    }
    if (greeting.size() > max_greeting) co_return make_error_code(sys::errc::protocol_error);
    error_code ec;
    const auto got = co_await socket.async_read_some(asio::buffer(buf), on_error(ec));
    greeting.append(buf.data(), got);
    if (ec) co_return ec;
  }
}

}  // namespace

bool is_ssh2_banner(std::string_view line) { return line.starts_with("SSH-2.0-") || line.starts_with("SSH-1.99-"); }

asio::awaitable<result<tcp::socket>> connect_to_node(tracing::action& parent, const node& n,
                                                     std::chrono::milliseconds timeout, diagnostics& diag) {
  auto act = parent.child(action_types::readiness::tcp_connect, {{"host", n.host}, {"port", n.port}});
  auto ex = co_await asio::this_coro::executor;
  tcp::socket socket(ex);
  const auto first = co_await net::with_deadline(resolve_and_connect(socket, n), timeout);
  error_code ec = first ? *first : make_error_code(asio::error::timed_out);
  if (co_await net::cancelled()) ec = make_error_code(asio::error::operation_aborted);
  if (ec) {
    diag.set(fmt::format("{}: TCP connect: {}", where(n), ec.message()));
    act.fail(ec, diag);
    co_return ec;
  }
  act.succeed();
  co_return std::move(socket);
}

asio::awaitable<result<std::string>> read_ssh_banner(tracing::action& parent, const node& n, tcp::socket& socket,
                                                     std::chrono::milliseconds timeout, diagnostics& diag) {
  auto act = parent.child(action_types::readiness::ssh_banner);
  auto ex = co_await asio::this_coro::executor;
  std::string greeting, line;
  const auto first = co_await net::with_deadline(read_banner(socket, greeting, line), timeout);
  error_code ec = first ? *first : make_error_code(asio::error::timed_out);
  if (co_await net::cancelled()) ec = make_error_code(asio::error::operation_aborted);
  if (!ec && !is_ssh2_banner(line)) ec = make_error_code(sys::errc::protocol_error);
  if (ec) {
    auto shown = line.empty() ? greeting.substr(0, std::min<std::size_t>(80, greeting.find_first_of("\r\n"))) : line;
    diag.set(fmt::format("{}: no SSH-2.0 identification: {}{}", where(n), ec.message(),
                         shown.empty() ? std::string() : fmt::format(" (got '{}')", shown)));
    act.fail(ec, diag);
    co_return ec;
  }
  act.succeed({{"banner", line}});
  co_return line;
}

}  // namespace ferry::provision
