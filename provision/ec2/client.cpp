#include "provision/ec2/client.hpp"

#include "net/digest.hpp"
#include "net/error.hpp"
#include "provision/ec2/api_error.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ferry::provision::ec2 {
namespace {

// Catalogue calls are about the whole region, not one thing.
constexpr std::string_view whole_region;

// A server that hands back the token it was given would page forever.
error_code repeated_token(std::string_view action, diagnostics& diag) {
  diag.set(fmt::format("{} returned the same nextToken twice: stopping rather than paging forever", action));
  return make_error_code(net::errc::bad_response);
}

std::string ids_subject(const std::vector<std::string>& ids) {
  if (ids.size() <= 3) return fmt::format("{}", fmt::join(ids, ", "));
  return fmt::format("{}, {} and {} more", ids[0], ids[1], ids.size() - 2);
}

}  // namespace

client::client(net::http_client& http, target where, const config::retry_settings& retry, int instances_per_page)
    : http_(http), target_(std::move(where)), origin_{target_.at.scheme, target_.at.host, target_.at.port},
      endpoint_text_(target_.at.origin() + target_.at.base_path),
      signer_(target_.creds, target_.region, "ec2", net::sigv4::generic_service_rules()), retry_(retry),
      instances_per_page_(std::clamp(instances_per_page, 5, 1000)) {}

net::http_request client::sign(const std::string& body) const {
  net::sigv4::request req;
  req.method = "POST";
  req.path = target_.at.base_path + "/";
  req.set_header("host", target_.at.authority());
  req.set_header("content-type", "application/x-www-form-urlencoded; charset=utf-8");
  req.payload_hash = net::hex_sha256(body);
  signer_.sign_headers(req, std::chrono::system_clock::now());

  net::http_request out;
  out.method = net::http::verb::post;
  out.target = req.path;
  for (const auto& h : req.headers) out.headers.insert(h.name, h.value);
  out.body = std::span<const char>(body.data(), body.size());
  return out;
}

asio::awaitable<result<std::string>> client::call_once(const query& q, std::string_view subject,
                                                       net::attempt_info& info) {
  const std::string body = q.form_body();
  const auto request = sign(body);
  auto response = co_await http_.send(origin_, request, nullptr, info.diag);
  if (!response) co_return response.error();
  if (response->status / 100 == 2) co_return std::move(response->body);
  const auto error = find_api_error(response->body);
  const call_info what{q.action, subject, endpoint_text_};
  co_return result<std::string>(boost::system::in_place_error,
                                api_failure(static_cast<int>(response->status), error, what, info.diag));
}

asio::awaitable<result<std::string>> client::call(tracing::action& parent, const query& q, std::string_view subject,
                                                  diagnostics& diag) {
  const std::string action_type = fmt::format("{}{}", action_types::ec2::request_prefix, q.action);
  // A plain lambda that returns call_once's coroutine: nothing it captures lives in a coroutine frame.
  auto attempt = [this, &q, subject](tracing::action& act, net::attempt_info& info) {
    act.log(action_types::ec2::call, {{"action", q.action}, {"subject", subject}, {"endpoint", endpoint_text_}});
    return call_once(q, subject, info);
  };
  co_return co_await net::with_retry<std::string>(parent, action_type, retry_, attempt, diag);
}

asio::awaitable<result<key_pair_info>> client::import_key_pair(tracing::action& parent, const std::string& name,
                                                               const std::string& public_key, diagnostics& diag) {
  const auto q = ec2::import_key_pair(name, public_key);
  const auto subject = "key pair " + name;
  auto body = co_await call(parent, q, subject, diag);
  if (!body) co_return body.error();
  co_return parse_import_key_pair(*body, diag);
}

asio::awaitable<result<instance>> client::run_instance(tracing::action& parent, const launch_request& launch,
                                                       diagnostics& diag) {
  const auto q = run_instances(launch);
  const auto subject = fmt::format("a {} instance of {}", launch.instance_type, launch.image_id);
  auto body = co_await call(parent, q, subject, diag);
  if (!body) co_return body.error();
  auto launched = parse_run_instances(*body, diag);
  if (!launched) co_return launched.error();
  co_return std::move(launched->front());
}

asio::awaitable<result<std::vector<instance>>> client::describe_instances(tracing::action& parent,
                                                                          const std::vector<std::string>& ids,
                                                                          const std::vector<filter>& filters,
                                                                          diagnostics& diag) {
  std::vector<instance> all;
  std::string token;
  const auto subject = ids_subject(ids);
  do {
    const auto q = ec2::describe_instances(ids, filters, token, instances_per_page_);
    auto body = co_await call(parent, q, subject, diag);
    if (!body) co_return body.error();
    auto page = parse_describe_instances(*body, diag);
    if (!page) co_return page.error();
    all.insert(all.end(), std::make_move_iterator(page->instances.begin()),
               std::make_move_iterator(page->instances.end()));
    if (!page->next_token.empty() && page->next_token == token) co_return repeated_token(q.action, diag);
    token = std::move(page->next_token);
  } while (!token.empty());
  co_return all;
}

asio::awaitable<result<std::vector<state_change>>> client::terminate_instances(tracing::action& parent,
                                                                               const std::vector<std::string>& ids,
                                                                               diagnostics& diag) {
  const auto q = ec2::terminate_instances(ids);
  const auto subject = ids_subject(ids);
  auto body = co_await call(parent, q, subject, diag);
  if (!body) co_return body.error();
  co_return parse_terminate_instances(*body, diag);
}

asio::awaitable<result<std::vector<instance_type_info>>> client::describe_instance_types(tracing::action& parent,
                                                                                         diagnostics& diag) {
  std::vector<instance_type_info> all;
  std::string token;
  do {
    const auto q = ec2::describe_instance_types(token);
    auto body = co_await call(parent, q, whole_region, diag);
    if (!body) co_return body.error();
    auto page = parse_describe_instance_types(*body, diag);
    if (!page) co_return page.error();
    all.insert(all.end(), std::make_move_iterator(page->types.begin()), std::make_move_iterator(page->types.end()));
    if (!page->next_token.empty() && page->next_token == token) co_return repeated_token(q.action, diag);
    token = std::move(page->next_token);
  } while (!token.empty());
  co_return all;
}

asio::awaitable<result<std::vector<spot_price>>> client::describe_spot_price_history(
    tracing::action& parent, std::chrono::system_clock::time_point start, diagnostics& diag) {
  std::vector<spot_price> all;
  std::string token;
  do {
    const auto q = ec2::describe_spot_price_history(start, token);
    auto body = co_await call(parent, q, whole_region, diag);
    if (!body) co_return body.error();
    auto page = parse_describe_spot_price_history(*body, diag);
    if (!page) co_return page.error();
    all.insert(all.end(), page->prices.begin(), page->prices.end());
    if (!page->next_token.empty() && page->next_token == token) co_return repeated_token(q.action, diag);
    token = std::move(page->next_token);
  } while (!token.empty());
  co_return all;
}

}  // namespace ferry::provision::ec2
