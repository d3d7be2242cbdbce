#include "agent/doctor/storage_link.hpp"

#include "net/deadline.hpp"
#include "net/error.hpp"
#include "net/http_connection.hpp"
#include "net/iso_time.hpp"
#include "net/s3_session.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

namespace ferry::agent::doctor {
namespace {

using clock = std::chrono::steady_clock;

std::optional<std::string> set_variable(const net::environment& env, std::string_view name) {
  auto value = env(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

// Where the endpoint net::resolve_endpoint chose came from, and what names it. net/ keeps that label to
// itself (it names it only in errors), so this follows the same order by elimination: ferry's setting, else
// nothing configured (AWS's own), else the two variables, else what is left: the profile.
void label_endpoint(storage_place& place, const config::loaded_config& cfg, const net::environment& env,
                    const net::aws_profile& profile, bool configured) {
  if (!cfg.values.storage.endpoint.empty()) {
    const auto it = cfg.origin.find("storage.endpoint");
    place.setting = "storage.endpoint";
    place.source = fmt::format("from storage.endpoint, {}", it == cfg.origin.end() ? "configured" : it->second);
  } else if (!configured) {
    place.source = "AWS's own endpoint";
  } else if (set_variable(env, "AWS_ENDPOINT_URL_S3")) {
    place.setting = "AWS_ENDPOINT_URL_S3";
  } else if (set_variable(env, "AWS_ENDPOINT_URL")) {
    place.setting = "AWS_ENDPOINT_URL";
  } else {
    place.setting = fmt::format("the endpoint_url of AWS profile '{}' in {}", profile.name, profile.config_path.string());
  }
  if (place.source.empty()) place.source = "from " + place.setting;
}

net::origin origin_of(const net::endpoint& at) { return {at.scheme, at.host, at.port}; }

std::chrono::milliseconds since(clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
}

// Ctrl-C, not the deadline: with_deadline answers a cancelled caller at once, as if it had timed out.
error_code interrupted(std::string_view what, diagnostics& diag) {
  diag.set(fmt::format("{}: interrupted", what));
  return make_error_code(boost::asio::error::operation_aborted);
}

// A limit of 0 (net.read_timeout = 0s) means no limit, as it does for every other command.
template <typename T>
asio::awaitable<std::optional<T>> within(asio::awaitable<T> op, std::chrono::milliseconds limit) {
  if (limit.count() > 0) co_return co_await net::with_deadline(std::move(op), limit);
  co_return std::optional<T>(co_await std::move(op));
}

error_code timed_out(std::string_view what, const net::endpoint& at, std::chrono::milliseconds limit,
                     std::string_view setting, diagnostics& diag) {
  diag.set(fmt::format("{} {}: no answer within {} ({})", what, at.origin(), config::format_duration(limit), setting));
  return make_error_code(net::errc::timeout);
}

}  // namespace

result<storage_place> locate_storage(const config::loaded_config& cfg, const net::environment& env,
                                     const net::aws_profile& profile, diagnostics& diag) {
  const auto& storage = cfg.values.storage;
  storage_place place;
  place.region = storage.region.empty() ? net::resolve_region(env, profile) : storage.region;
  auto configured = net::resolve_endpoint("s3", storage.endpoint, env, profile, diag);
  if (!configured) return configured.error();
  place.at = configured->value_or(net::aws_endpoint("s3", place.region));
  label_endpoint(place, cfg, env, profile, configured->has_value());
  auto style = net::resolve_addressing_style(storage.addressing, profile, diag);
  if (!style) return style.error();
  place.style = *style;
  return place;
}

storage_link::storage_link(asio::any_io_executor io, const config::settings& s, storage_place place,
                           std::shared_ptr<asio::ssl::context> tls, std::optional<net::credentials> creds,
                           std::chrono::milliseconds clock_offset)
    : io_(io), ping_timeouts_{s.net.connect_timeout, s.net.connect_timeout, s.net.connect_timeout},
      request_deadline_(s.net.connect_timeout.count() == 0 || s.net.read_timeout.count() == 0
                            ? std::chrono::milliseconds(0)
                            : s.net.connect_timeout + s.net.read_timeout), place_(std::move(place)), tls_(std::move(tls)),
      http_(std::make_unique<net::http_client>(io, net::http_settings(s.net), tls_)), clock_offset_(clock_offset) {
  if (creds) signer_.emplace(std::move(*creds), place_.region, "s3", net::sigv4::s3_rules());
}

asio::awaitable<result<ping_reply>> storage_link::ping_once(diagnostics& diag) {
  const auto start = clock::now();
  const auto sent_at = now();
  const auto to = origin_of(place_.at);
  auto connection = co_await net::http_connection::open(to, tls_.get(), ping_timeouts_, diag);
  if (!connection) co_return connection.error();
  net::http_request request;
  request.method = net::http::verb::get;
  request.target = place_.at.base_path + "/";
  request.headers.set(net::http::field::host, place_.at.authority());
  auto response = co_await (*connection)->exchange(request, nullptr, 64 << 10, diag);
  if (!response) co_return response.error();
  ping_reply reply;
  reply.status = response->status;
  reply.took = since(start);
  reply.local_mid = sent_at + (now() - sent_at) / 2;
  reply.server_seconds = net::unix_seconds_of_http_date(response->header("Date"));
  co_return reply;
}

asio::awaitable<result<ping_reply>> storage_link::ping(diagnostics& diag) {
  const auto limit = ping_timeouts_.connect;
  auto done = co_await within(ping_once(diag), limit);
  // Ask first: a cancelled ping ends as the deadline would (net/deadline.hpp).
  const bool stopped = co_await net::cancelled();
  if (stopped) co_return interrupted(fmt::format("connecting to {}", place_.at.origin()), diag);
  if (!done) co_return timed_out("connecting to", place_.at, limit, "net.connect_timeout", diag);
  co_return std::move(*done);
}

net::http_request storage_link::sign(const storage_call& c) const {
  const auto where = net::locate_object(place_.at, c.bucket, c.key, place_.style);
  net::sigv4::request req;
  req.method = std::string(net::http::to_string(c.method));
  req.path = where.path;
  req.query = c.query;
  req.set_header("host", where.host);
  req.payload_hash = c.body.empty() ? std::string(net::sigv4::empty_payload_sha256) : net::hex_sha256(c.body);
  signer_->sign_headers(req, now());

  net::http_request out;
  out.method = c.method;
  out.target = where.path;
  if (!c.query.empty()) out.target += "?" + net::sigv4::canonical_query(c.query);
  for (const auto& h : req.headers) out.headers.insert(h.name, h.value);
  if (!c.body.empty()) out.body = std::span<const char>(c.body.data(), c.body.size());
  return out;
}

asio::awaitable<result<net::http_response>> storage_link::send(tracing::action& act, const storage_call& c,
                                                               diagnostics& diag) {
  const auto request = sign(c);
  const auto to = origin_of(place_.at);
  auto done = co_await within(http_->send(to, request, nullptr, diag), request_deadline_);
  const bool stopped = co_await net::cancelled();
  if (stopped) {
    act.log(action_types::doctor::request, {{"operation", c.operation}, {"key", c.key}, {"status", "interrupted"}});
    co_return interrupted(c.operation, diag);
  }
  if (!done) {
    act.log(action_types::doctor::request, {{"operation", c.operation}, {"key", c.key}, {"status", "timeout"}});
    co_return timed_out(c.operation, place_.at, request_deadline_, "net.connect_timeout + net.read_timeout", diag);
  }
  // Logged however it ended: the key of a PUT that got no answer is in the trace too (it may have landed).
  if (*done)
    act.log(action_types::doctor::request, {{"operation", c.operation}, {"key", c.key}, {"status", (*done)->status}});
  else
    act.log(action_types::doctor::request, {{"operation", c.operation}, {"key", c.key}, {"status", "failed"}});
  co_return std::move(*done);
}

}  // namespace ferry::agent::doctor
