#pragma once
// One HTTP/1.1 connection, plain or TLS, with a deadline on every connect, read and write. It sends a
// request head and streams the body straight from memory or a file, then streams the response body to
// a sink in chunks. The pool decides when a connection is reused.
#include "net/cancellation.hpp"
#include "net/http_message.hpp"
#include "net/stall_watch.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <chrono>
#include <memory>
#include <variant>
#include <vector>

namespace ferry::net {

namespace asio = boost::asio;
namespace beast = boost::beast;

struct http_timeouts {
  std::chrono::milliseconds connect{10'000};
  std::chrono::milliseconds read{60'000};   // 0: no limit (net.read_timeout)
  std::chrono::milliseconds write{60'000};  // 0: no limit (net.write_timeout)
};

class http_connection {
 public:
  using tls_stream = beast::ssl_stream<beast::tcp_stream>;
  // Bodies are read and written through a buffer of this size.
  static constexpr std::size_t body_chunk_size = 128 << 10;

  // Resolves, connects and (for https) completes the TLS handshake with SNI and host name checks.
  static asio::awaitable<result<std::unique_ptr<http_connection>>> open(const origin& to, asio::ssl::context* tls,
                                                                         const http_timeouts& timeouts,
                                                                         diagnostics& diag);

  // Sends the request and receives the response. With a sink, the body goes there; without one it is
  // collected into the response, up to `max_collected` bytes. `watch` (may be null) hears of the bytes
  // moving either way.
  asio::awaitable<result<http_response>> exchange(const http_request& request, const body_sink* sink,
                                                  std::size_t max_collected, diagnostics& diag,
                                                  stall_watch* watch = nullptr) {
    return exchange(request, response_sink{sink, nullptr}, max_collected, diag, watch);
  }
  asio::awaitable<result<http_response>> exchange(const http_request& request, response_sink sink,
                                                  std::size_t max_collected, diagnostics& diag,
                                                  stall_watch* watch = nullptr);

  // The server allows another request, and the last exchange completed cleanly.
  bool reusable() const { return reusable_; }
  // Whether any response byte of the last exchange arrived (a stale reused connection fails before).
  bool got_response() const { return got_response_; }
  std::chrono::steady_clock::time_point idle_since() const { return idle_since_; }
  const origin& peer() const { return origin_; }

 private:
  http_connection(origin to, std::variant<beast::tcp_stream, tls_stream> stream, const http_timeouts& timeouts);

  template <class Stream>
  asio::awaitable<result<http_response>> exchange_on(Stream& stream, const http_request& request,
                                                     response_sink sink, std::size_t max_collected,
                                                     diagnostics& diag);
  template <class Stream>
  asio::awaitable<error_code> send_body(Stream& stream, const request_body& body);
  template <class Stream>
  asio::awaitable<error_code> send_aws_chunked(Stream& stream, const file_region& file);

  // Where a response body goes: the sink, or the response itself up to a cap.
  struct body_target {
    response_sink sink;
    std::size_t max_collected;
    http_response& response;
  };
  asio::awaitable<error_code> deliver(std::span<const char> bytes, body_target& target, diagnostics& diag);
  template <class Stream>
  asio::awaitable<error_code> read_sized_body(Stream& stream, std::uint64_t length, body_target& target,
                                              diagnostics& diag);
  template <class Stream>
  asio::awaitable<error_code> read_parsed_body(Stream& stream, http::response_parser<http::buffer_body>& parser,
                                               body_target& target, diagnostics& diag);

  beast::tcp_stream& tcp();
  // The next read's or write's deadline: `limit` from now, or none for a limit of 0.
  void arm(std::chrono::milliseconds limit);

  origin origin_;
  std::variant<beast::tcp_stream, tls_stream> stream_;
  http_timeouts timeouts_;
  beast::flat_buffer buffer_;
  std::vector<char> chunk_;  // response body chunks and file reads pass through here
  // Each socket operation of an exchange is bound through it: the caller's Ctrl-C ends it at once. A
  // connection whose exchange was cancelled is not reusable, so terminal cancellation costs nothing.
  terminal_relay relay_;
  // The exchange under way, as the stall watch sees it; null between exchanges.
  stall_watch::exchange* traffic_ = nullptr;
  void sent() {
    if (traffic_) traffic_->sent();
  }
  void received() {
    if (traffic_) traffic_->received();
  }
  bool reusable_ = false;
  bool got_response_ = false;
  std::chrono::steady_clock::time_point idle_since_;
};

// A transport failure as ferry's own code, with the host and what was being done in `diag`.
error_code classify_transport_error(const error_code& ec, std::string_view doing, const origin& to, diagnostics& diag);

}  // namespace ferry::net
