#include "net/http_connection.hpp"

#include "net/aws_chunked.hpp"
#include "net/digest.hpp"
#include "net/error.hpp"

#include "net/deadline.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <unistd.h>

namespace ferry::net {
namespace {

using asio::ip::tcp;


bool is_ip_literal(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// The name the server's certificate must carry: the IP address among its IP entries, or the host name.
// OpenSSL checks it during the handshake, so that a mismatch is reported as one.
bool expect_peer_name(SSL* ssl, const std::string& host) {
  if (is_ip_literal(host)) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  return SSL_set1_host(ssl, host.c_str()) == 1;
}

// Why the server's certificate was refused, in OpenSSL's words, with what a person can do about it.
std::string verify_failure(long verdict) {
  std::string why = X509_verify_cert_error_string(verdict);
  if (verdict == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY || verdict == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
      verdict == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT || verdict == X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE)
    why += " (for a private CA, name its certificate in storage.ca_bundle)";
  return why;
}

asio::awaitable<result<tcp::resolver::results_type>> resolve(const origin& to, std::chrono::milliseconds deadline,
                                                             diagnostics& diag) {
  tcp::resolver resolver(co_await asio::this_coro::executor);
  error_code ec;
  auto done = co_await with_deadline(
      resolver.async_resolve(to.host, std::to_string(to.port), asio::redirect_error(asio::use_awaitable, ec)),
      deadline);
  if (!done) co_return classify_transport_error(beast::error::timeout, "resolving", to, diag);
  if (ec) co_return classify_transport_error(ec, "resolving", to, diag);
  co_return std::move(*done);
}

}  // namespace

error_code classify_transport_error(const error_code& ec, std::string_view doing, const origin& to, diagnostics& diag) {
  if (ec == asio::error::operation_aborted) return ec;
  errc code = errc::connection_failed;
  if (ec == beast::error::timeout || ec == asio::error::timed_out)
    code = errc::timeout;
  else if (ec == asio::error::host_not_found || ec == asio::error::host_not_found_try_again ||
           ec == asio::error::no_data)
    code = errc::name_resolution_failed;
  else if (ec.category() == asio::error::get_ssl_category())
    code = errc::tls_failed;
  // A TLS stream that ends without close_notify is a dropped connection like any other (and as such
  // worth another attempt), not a TLS failure.
  diag.set(fmt::format("{} {}: {}", doing, to.key(), ec.message()));
  return make_error_code(code);
}

http_connection::http_connection(origin to, std::variant<beast::tcp_stream, tls_stream> stream,
                                 const http_timeouts& timeouts)
    : origin_(std::move(to)), stream_(std::move(stream)), timeouts_(timeouts), chunk_(body_chunk_size),
      idle_since_(std::chrono::steady_clock::now()) {}

beast::tcp_stream& http_connection::tcp() {
  return std::visit([](auto& s) -> beast::tcp_stream& { return beast::get_lowest_layer(s); }, stream_);
}

void http_connection::arm(std::chrono::milliseconds limit) {
  if (limit.count() > 0)
    tcp().expires_after(limit);
  else
    tcp().expires_never();
}

asio::awaitable<result<std::unique_ptr<http_connection>>> http_connection::open(const origin& to,
                                                                                asio::ssl::context* tls,
                                                                                const http_timeouts& timeouts,
                                                                                diagnostics& diag) {
  auto ex = co_await asio::this_coro::executor;
  auto endpoints = co_await resolve(to, timeouts.connect, diag);
  if (!endpoints) co_return endpoints.error();
  beast::tcp_stream tcp_stream(ex);
  tcp_stream.expires_after(timeouts.connect);
  error_code ec;
  const auto state = co_await asio::this_coro::cancellation_state;
  terminal_relay relay(state.slot());
  co_await tcp_stream.async_connect(*endpoints, relay.bind(asio::redirect_error(asio::use_awaitable, ec)));
  if (ec) co_return classify_transport_error(ec, "connecting to", to, diag);
  tcp_stream.socket().set_option(tcp::no_delay(true));
  if (!to.tls()) co_return std::unique_ptr<http_connection>(new http_connection(to, std::move(tcp_stream), timeouts));

  if (!tls) {
    diag.set(fmt::format("connecting to {}: no TLS context", to.key()));
    co_return make_error_code(errc::tls_failed);
  }
  tls_stream stream(std::move(tcp_stream), *tls);
  // SNI names the host for virtual hosting; IP literals are not sent, as RFC 6066 requires.
  if (!is_ip_literal(to.host) && !SSL_set_tlsext_host_name(stream.native_handle(), to.host.c_str())) {
    diag.set(fmt::format("connecting to {}: cannot set SNI", to.key()));
    co_return make_error_code(errc::tls_failed);
  }
  if (!expect_peer_name(stream.native_handle(), to.host)) {
    diag.set(fmt::format("connecting to {}: cannot set the name to verify", to.key()));
    co_return make_error_code(errc::tls_failed);
  }
  beast::get_lowest_layer(stream).expires_after(timeouts.connect);
  co_await stream.async_handshake(asio::ssl::stream_base::client,
                                  relay.bind(asio::redirect_error(asio::use_awaitable, ec)));
  if (const auto verdict = SSL_get_verify_result(stream.native_handle()); ec && verdict != X509_V_OK) {
    diag.set(fmt::format("TLS handshake with {}: the server's certificate could not be verified: {}", to.key(),
                         verify_failure(verdict)));
    co_return make_error_code(errc::tls_failed);
  }
  if (ec) co_return classify_transport_error(ec, "TLS handshake with", to, diag);
  co_return std::unique_ptr<http_connection>(new http_connection(to, std::move(stream), timeouts));
}

asio::awaitable<result<http_response>> http_connection::exchange(const http_request& request, response_sink sink,
                                                                 std::size_t max_collected, diagnostics& diag,
                                                                 stall_watch* watch) {
  auto state = co_await asio::this_coro::cancellation_state;
  if (state.cancelled() != asio::cancellation_type::none) co_return make_error_code(asio::error::operation_aborted);
  relay_.attach(state.slot());
  stall_watch::exchange traffic(watch, tcp().socket().native_handle());
  traffic_ = &traffic;
  struct detach_relay {
    http_connection& c;
    ~detach_relay() {
      c.relay_.detach();
      c.traffic_ = nullptr;
    }
  } detaching{*this};
  reusable_ = false;
  got_response_ = false;
  if (auto* plain = std::get_if<beast::tcp_stream>(&stream_))
    co_return co_await exchange_on(*plain, request, sink, max_collected, diag);
  co_return co_await exchange_on(std::get<tls_stream>(stream_), request, sink, max_collected, diag);
}

template <class Stream>
asio::awaitable<error_code> http_connection::send_body(Stream& stream, const request_body& body) {
  error_code ec;
  if (const auto* memory = std::get_if<std::span<const char>>(&body)) {
    // A chunk at a time, as files go: each chunk that goes out is progress the stall watch hears of.
    for (std::size_t sent_bytes = 0; sent_bytes < memory->size() && !ec;) {
      const auto n = std::min(chunk_.size(), memory->size() - sent_bytes);
      arm(timeouts_.write);
      co_await asio::async_write(stream, asio::buffer(memory->data() + sent_bytes, n),
                                 relay_.bind(asio::redirect_error(asio::use_awaitable, ec)));
      if (!ec) sent();
      sent_bytes += n;
    }
    co_return ec;
  }
  if (const auto* chunked = std::get_if<aws_chunked_file>(&body)) co_return co_await send_aws_chunked(stream, chunked->region);
  if (const auto* file = std::get_if<file_region>(&body)) {
    std::uint64_t sent = 0;
    while (sent < file->length && !ec) {
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_.size(), file->length - sent));
      const auto got = ::pread(file->fd, chunk_.data(), want, static_cast<off_t>(file->offset + sent));
      if (got <= 0) co_return error_code(got < 0 ? errno : EIO, boost::system::system_category());
      arm(timeouts_.write);
      co_await asio::async_write(stream, asio::buffer(chunk_.data(), static_cast<std::size_t>(got)),
                                 relay_.bind(asio::redirect_error(asio::use_awaitable, ec)));
      if (!ec) this->sent();
      sent += static_cast<std::uint64_t>(got);
    }
  }
  co_return ec;
}

template <class Stream>
asio::awaitable<result<http_response>> http_connection::exchange_on(Stream& stream, const http_request& request,
                                                                    response_sink sink, std::size_t max_collected,
                                                                    diagnostics& diag) {
  http::request<http::empty_body> head{request.method, request.target, 11};
  for (const auto& field : request.headers) head.set(field.name_string(), field.value());
  const auto size = body_size(request.body);
  if (size > 0 || request.method == http::verb::put || request.method == http::verb::post) head.content_length(size);
  head.keep_alive(true);

  error_code ec;
  http::request_serializer<http::empty_body> serializer(head);
  arm(timeouts_.write);
  co_await http::async_write_header(stream, serializer,
                                    relay_.bind(asio::redirect_error(asio::use_awaitable, ec)));
  if (!ec) sent();
  if (!ec) ec = co_await send_body(stream, request.body);
  if (ec) co_return classify_transport_error(ec, "sending to", origin_, diag);

  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  parser.skip(request.method == http::verb::head);
  arm(timeouts_.read);
  co_await http::async_read_header(stream, buffer_, parser,
                                   relay_.bind(asio::redirect_error(asio::use_awaitable, ec)));
  if (ec) co_return classify_transport_error(ec, "reading the response from", origin_, diag);
  got_response_ = true;
  received();

  http_response response;
  response.status = parser.get().result_int();
  response.headers = parser.get().base();
  // Only a successful body streams to the sink; an error's body is the explanation, read whole.
  if (response.status / 100 != 2) sink = {};
  body_target target{sink, max_collected, response};
  const auto length = parser.content_length();
  if (!parser.is_done() && length && !parser.chunked())
    ec = co_await read_sized_body(stream, *length, target, diag);
  else
    ec = co_await read_parsed_body(stream, parser, target, diag);
  if (ec) co_return ec;
  // A sized body read outside the parser leaves it unfinished; keep-alive is still the header's word.
  reusable_ = parser.keep_alive();
  idle_since_ = std::chrono::steady_clock::now();
  co_return response;
}

asio::awaitable<error_code> http_connection::deliver(std::span<const char> bytes, body_target& target,
                                                     diagnostics& diag) {
  target.response.body_bytes += bytes.size();
  if (target.sink.sync) co_return (*target.sink.sync)(bytes);
  if (target.sink.async) co_return co_await (*target.sink.async)(bytes);
  if (target.response.body.size() + bytes.size() > target.max_collected) {
    diag.set(fmt::format("response from {} is over {} bytes", origin_.key(), target.max_collected));
    co_return make_error_code(errc::body_too_large);
  }
  target.response.body.append(bytes.data(), bytes.size());
  co_return error_code{};
}

// With a Content-Length, the body is read straight from the stream into our chunk, in reads as large
// as the socket offers: no parser copy, and one deadline per read rather than per 512 bytes.
template <class Stream>
asio::awaitable<error_code> http_connection::read_sized_body(Stream& stream, std::uint64_t length,
                                                             body_target& target, diagnostics& diag) {
  const auto buffered = std::min<std::uint64_t>(length, buffer_.size());
  if (buffered > 0) {
    const auto* data = static_cast<const char*>(buffer_.data().data());
    if (auto ec = co_await deliver({data, static_cast<std::size_t>(buffered)}, target, diag)) co_return ec;
    buffer_.consume(static_cast<std::size_t>(buffered));
  }
  for (std::uint64_t left = length - buffered; left > 0;) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_.size(), left));
    error_code ec;
    arm(timeouts_.read);
    const auto n = co_await stream.async_read_some(asio::buffer(chunk_.data(), want),
                                                   relay_.bind(asio::redirect_error(asio::use_awaitable, ec)));
    if (ec) co_return classify_transport_error(ec, "reading the response body from", origin_, diag);
    received();
    if (auto sink_ec = co_await deliver({chunk_.data(), n}, target, diag)) co_return sink_ec;
    left -= n;
  }
  co_return error_code{};
}

// Chunked (or length-less) bodies go through Beast's parser, a chunk buffer at a time.
template <class Stream>
asio::awaitable<error_code> http_connection::read_parsed_body(Stream& stream,
                                                              http::response_parser<http::buffer_body>& parser,
                                                              body_target& target, diagnostics& diag) {
  while (!parser.is_done()) {
    parser.get().body().data = chunk_.data();
    parser.get().body().size = chunk_.size();
    error_code ec;
    arm(timeouts_.read);
    co_await http::async_read(stream, buffer_, parser,
                              relay_.bind(asio::redirect_error(asio::use_awaitable, ec)));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return classify_transport_error(ec, "reading the response body from", origin_, diag);
    received();
    if (auto sink_ec = co_await deliver({chunk_.data(), chunk_.size() - parser.get().body().size}, target, diag))
      co_return sink_ec;
  }
  co_return error_code{};
}

template <class Stream>
asio::awaitable<error_code> http_connection::send_aws_chunked(Stream& stream, const file_region& file) {
  sha256_stream hash;
  error_code ec;
  for (std::uint64_t chunk_start = 0; chunk_start < file.length && !ec;) {
    const auto chunk = std::min<std::uint64_t>(aws_chunked::chunk_size, file.length - chunk_start);
    const auto header = aws_chunked::chunk_header(chunk);
    arm(timeouts_.write);
    co_await asio::async_write(stream, asio::buffer(header),
                               relay_.bind(asio::redirect_error(asio::use_awaitable, ec)));
    for (std::uint64_t sent = 0; sent < chunk && !ec;) {
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_.size(), chunk - sent));
      const auto got = ::pread(file.fd, chunk_.data(), want, static_cast<off_t>(file.offset + chunk_start + sent));
      if (got <= 0) co_return error_code(got < 0 ? errno : EIO, boost::system::system_category());
      hash.update({chunk_.data(), static_cast<std::size_t>(got)});
      arm(timeouts_.write);
      co_await asio::async_write(stream, asio::buffer(chunk_.data(), static_cast<std::size_t>(got)),
                                 relay_.bind(asio::redirect_error(asio::use_awaitable, ec)));
      if (!ec) this->sent();
      sent += static_cast<std::uint64_t>(got);
    }
    if (!ec)
      co_await asio::async_write(stream, asio::buffer(aws_chunked::chunk_end.data(), aws_chunked::chunk_end.size()),
                                 relay_.bind(asio::redirect_error(asio::use_awaitable, ec)));
    chunk_start += chunk;
  }
  if (ec) co_return ec;
  const auto digest = hash.finish();
  std::string b64(beast::detail::base64::encoded_size(digest.size()), '\0');
  b64.resize(beast::detail::base64::encode(b64.data(), digest.data(), digest.size()));
  const auto last = aws_chunked::final_chunk(b64);
  arm(timeouts_.write);
  co_await asio::async_write(stream, asio::buffer(last),
                             relay_.bind(asio::redirect_error(asio::use_awaitable, ec)));
  co_return ec;
}

std::uint64_t body_size(const request_body& body) {
  if (const auto* memory = std::get_if<std::span<const char>>(&body)) return memory->size();
  if (const auto* file = std::get_if<file_region>(&body)) return file->length;
  if (const auto* chunked = std::get_if<aws_chunked_file>(&body))
    return aws_chunked::encoded_length(chunked->region.length, aws_chunked::chunk_size);
  return 0;
}

}  // namespace ferry::net
