#include "net/http_client.hpp"

#include "net/cancellation.hpp"
#include "net/error.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <deque>

namespace ferry::net {

// Per origin: idle connections, and a channel used as a counting semaphore. Its buffer holds one
// token per connection in use; a send waits while the buffer is full.
struct http_client::host {
  host(asio::any_io_executor io, int limit) : slots(io, static_cast<std::size_t>(limit)) {}
  asio::experimental::channel<void(error_code)> slots;
  std::deque<std::unique_ptr<http_connection>> idle;
};

http_client::http_client(asio::any_io_executor io, http_client_settings settings,
                         std::shared_ptr<asio::ssl::context> tls, stall_watch* watch)
    : io_(std::move(io)), settings_(settings), tls_(std::move(tls)), watch_(watch) {}

http_client::~http_client() = default;

http_client::host& http_client::host_for(const origin& to) {
  auto& slot = hosts_[to.key()];
  if (!slot) slot = std::make_unique<host>(io_, std::max(1, settings_.max_connections_per_host));
  return *slot;
}

asio::awaitable<result<std::unique_ptr<http_connection>>> http_client::take(host& h, const origin& to,
                                                                            diagnostics& diag) {
  const auto now = std::chrono::steady_clock::now();
  while (!h.idle.empty()) {
    auto connection = std::move(h.idle.back());
    h.idle.pop_back();
    if (now - connection->idle_since() < settings_.idle_timeout) co_return connection;
  }
  co_return co_await http_connection::open(to, tls_.get(), settings_.timeouts, diag);
}

void http_client::give_back(host& h, std::unique_ptr<http_connection> connection) {
  if (connection && connection->reusable()) h.idle.push_back(std::move(connection));
}

asio::awaitable<result<http_response>> http_client::send(const origin& to, const http_request& request,
                                                         response_sink sink, diagnostics& diag) {
  auto& h = host_for(to);
  error_code ec;
  co_await h.slots.async_send(error_code{}, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return as_cancellation(ec);
  // The token goes back on every path out, cancellation included.
  struct release {
    host& h;
    ~release() { h.slots.try_receive([](error_code) {}); }
  } releaser{h};

  const bool had_idle = !h.idle.empty();
  auto connection = co_await take(h, to, diag);
  if (!connection) co_return connection.error();
  auto response = co_await (*connection)->exchange(request, sink, settings_.max_collected_body, diag, watch_);
  // Only a connection error says the server had closed it; a timeout may mean it is still working on it.
  if (!response && had_idle && !(*connection)->got_response() &&
      response.error() == make_error_code(errc::connection_failed)) {
    // A keep-alive connection the server had closed in the meantime: one more try on a new one.
    diag.clear();
    connection = co_await http_connection::open(to, tls_.get(), settings_.timeouts, diag);
    if (!connection) co_return connection.error();
    response = co_await (*connection)->exchange(request, sink, settings_.max_collected_body, diag, watch_);
  }
  if (response) give_back(h, std::move(*connection));
  co_return response;
}

}  // namespace ferry::net
