#pragma once
// How `ferry doctor` talks to storage. The endpoint, region and addressing come from net/ exactly as every
// other command finds them; what differs is the requests: one attempt each (a doctor wants the first
// answer, not the one after three backoffs), the response kept whatever its status (so that a refusal's
// S3 error code, and every reply's Date header, can be read), and signed with ferry's clock shifted by
// --clock-offset, so that a test can show what a skewed clock does.
#include "config/loader.hpp"
#include "net/credentials.hpp"
#include "net/endpoint.hpp"
#include "net/http_client.hpp"
#include "net/sigv4.hpp"
#include "tracing/action.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ferry::agent::doctor {

namespace asio = boost::asio;

// The storage endpoint and where its setting came from.
struct storage_place {
  net::endpoint at;
  std::string source;   // "from AWS_ENDPOINT_URL", "AWS's own for region us-east-1", ...
  std::string setting;  // what names it, to change it: "AWS_ENDPOINT_URL"; empty for AWS's own
  std::string region;
  net::addressing_style style = net::addressing_style::automatic;
};

result<storage_place> locate_storage(const config::loaded_config& cfg, const net::environment& env,
                                     const net::aws_profile& profile, diagnostics& diag);

// What an unsigned GET of the endpoint got back.
struct ping_reply {
  unsigned status = 0;
  std::optional<std::int64_t> server_seconds;  // its Date header, unix seconds
  // ferry's clock (with --clock-offset) halfway through the exchange, to compare with the Date.
  std::chrono::system_clock::time_point local_mid;
  std::chrono::milliseconds took{0};
};

// One S3 request, before signing.
struct storage_call {
  std::string_view operation;  // "ListObjectsV2": for messages and the trace
  net::http::verb method = net::http::verb::get;
  std::string bucket;
  std::string key;
  std::vector<net::sigv4::query_parameter> query;
  std::string body;
};

class storage_link {
 public:
  // `creds` may be absent: then only ping() works.
  storage_link(asio::any_io_executor io, const config::settings& s, storage_place place,
               std::shared_ptr<asio::ssl::context> tls, std::optional<net::credentials> creds,
               std::chrono::milliseconds clock_offset);

  const storage_place& place() const { return place_; }
  bool can_sign() const { return signer_.has_value(); }
  // ferry's idea of now: the system clock plus --clock-offset.
  std::chrono::system_clock::time_point now() const { return std::chrono::system_clock::now() + clock_offset_; }

  // An unsigned GET of the endpoint's base path on a connection of its own, within net.connect_timeout:
  // any HTTP answer shows the endpoint answers.
  asio::awaitable<result<ping_reply>> ping(diagnostics& diag);

  // One signed request within net.connect_timeout + net.read_timeout: the response whatever its status,
  // or the transport's failure. Each is a `ferry:doctor:request` message in `act`.
  asio::awaitable<result<net::http_response>> send(tracing::action& act, const storage_call& c, diagnostics& diag);

 private:
  asio::awaitable<result<ping_reply>> ping_once(diagnostics& diag);
  net::http_request sign(const storage_call& c) const;

  asio::any_io_executor io_;
  net::http_timeouts ping_timeouts_;
  std::chrono::milliseconds request_deadline_;
  storage_place place_;
  std::shared_ptr<asio::ssl::context> tls_;
  std::unique_ptr<net::http_client> http_;
  std::optional<net::sigv4::signer> signer_;
  std::chrono::milliseconds clock_offset_;
};

}  // namespace ferry::agent::doctor
