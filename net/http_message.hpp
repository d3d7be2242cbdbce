#pragma once
// What an HTTP exchange sends and receives. Bodies stream: a request body is borrowed memory or a
// region of a file, read as it is sent; a response body goes to a sink chunk by chunk, or, for the
// small XML answers of S3 and EC2, into a string with a size cap. No object is ever held whole.
#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace ferry::net {

namespace http = boost::beast::http;

// scheme://host:port: the key of the connection pool.
struct origin {
  std::string scheme;  // "http" or "https"
  std::string host;
  std::uint16_t port = 0;

  bool tls() const { return scheme == "https"; }
  std::string key() const { return scheme + "://" + host + ":" + std::to_string(port); }
};

// A byte range of an open file, sent with pread so that a retry can send it again.
struct file_region {
  int fd = -1;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

// A file region sent with S3's aws-chunked encoding and a SHA-256 trailer (net/aws_chunked.hpp).
struct aws_chunked_file {
  file_region region;
};

using request_body = std::variant<std::monostate, std::span<const char>, file_region, aws_chunked_file>;

struct http_request {
  http::verb method = http::verb::get;
  std::string target;   // path and query, already encoded
  http::fields headers;  // Host and any signature are set by the caller
  request_body body;
};

std::uint64_t body_size(const request_body& body);

// Receives a response body chunk by chunk; an error stops the transfer.
using body_sink = std::function<boost::system::error_code(std::span<const char> chunk)>;
// The same, for a receiver that waits (hands chunks to a CPU pool): the next read starts only when it
// is done with this chunk, so a slow receiver slows the download instead of piling up memory.
using async_body_sink =
    std::function<boost::asio::awaitable<boost::system::error_code>(std::span<const char> chunk)>;

// Where a successful response body goes: at most one of the two; neither collects it into the response.
struct response_sink {
  const body_sink* sync = nullptr;
  const async_body_sink* async = nullptr;
  bool empty() const { return !sync && !async; }
};

struct http_response {
  unsigned status = 0;
  http::fields headers;
  std::string body;  // filled only when the request had no sink
  std::uint64_t body_bytes = 0;

  // A header's value, or "" when the response has none.
  std::string header(std::string_view name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? std::string() : std::string(it->value());
  }
};

}  // namespace ferry::net
