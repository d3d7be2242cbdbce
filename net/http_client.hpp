#pragma once
// The HTTP client: a keep-alive connection pool per origin with a limit on connections per host.
// A request goes out on an idle connection when there is one; a reused connection that the server had
// already closed (it fails before any response byte) is replaced once, transparently, because such a
// failure says nothing about the request. Retrying real failures is the caller's business (net/retry).
#include "net/http_connection.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/experimental/channel.hpp>

#include <map>
#include <memory>
#include <string>

namespace ferry::net {

struct http_client_settings {
  http_timeouts timeouts;
  int max_connections_per_host = 16;
  std::chrono::milliseconds idle_timeout{30'000};
  std::size_t max_collected_body = 64 << 20;  // the largest XML answer read whole
};

class http_client {
 public:
  // Every exchange reports its traffic to `watch` when there is one (net/stall_watch.hpp).
  http_client(asio::any_io_executor io, http_client_settings settings, std::shared_ptr<asio::ssl::context> tls,
              stall_watch* watch = nullptr);
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  // Sends one request to `to`. With a sink the response body streams there, else into response.body.
  asio::awaitable<result<http_response>> send(const origin& to, const http_request& request, const body_sink* sink,
                                              diagnostics& diag) {
    return send(to, request, response_sink{sink, nullptr}, diag);
  }
  asio::awaitable<result<http_response>> send(const origin& to, const http_request& request, response_sink sink,
                                              diagnostics& diag);

  const http_client_settings& settings() const { return settings_; }

 private:
  struct host;
  host& host_for(const origin& to);
  asio::awaitable<result<std::unique_ptr<http_connection>>> take(host& h, const origin& to, diagnostics& diag);
  void give_back(host& h, std::unique_ptr<http_connection> connection);

  asio::any_io_executor io_;
  http_client_settings settings_;
  std::shared_ptr<asio::ssl::context> tls_;
  stall_watch* watch_;
  std::map<std::string, std::unique_ptr<host>> hosts_;
};

}  // namespace ferry::net
