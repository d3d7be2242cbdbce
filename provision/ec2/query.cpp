#include "provision/ec2/query.hpp"

#include "net/uri_encode.hpp"
#include "tracing/action_types.hpp"

#include <boost/beast/core/detail/base64.hpp>
#include <fmt/format.h>

#include <ctime>

namespace ferry::provision::ec2 {
namespace {

namespace base64 = boost::beast::detail::base64;

// A request for the Action whose attempts are traced as `type`: the Action is spelled once, in the name.
query request_for(std::string_view type) { return query{std::string(action_types::ec2::api_action(type)), {}}; }

std::string base64_encode(std::string_view bytes) {
  std::string out(base64::encoded_size(bytes.size()), '\0');
  out.resize(base64::encode(out.data(), bytes.data(), bytes.size()));
  return out;
}

// Name.1, Name.2, ... for a list parameter.
void add_list(query& q, std::string_view name, const std::vector<std::string>& values) {
  for (std::size_t i = 0; i < values.size(); ++i) q.add(fmt::format("{}.{}", name, i + 1), values[i]);
}

void add_filters(query& q, const std::vector<filter>& filters) {
  for (std::size_t i = 0; i < filters.size(); ++i) {
    const auto prefix = fmt::format("Filter.{}", i + 1);
    q.add(prefix + ".Name", filters[i].name);
    add_list(q, prefix + ".Value", filters[i].values);
  }
}

// One TagSpecification per resource type: the instance, and its volumes so they are traceable too.
void add_tag_specifications(query& q, const std::vector<tag>& tags) {
  if (tags.empty()) return;
  int spec = 0;
  for (const std::string_view resource : {"instance", "volume"}) {
    const auto prefix = fmt::format("TagSpecification.{}", ++spec);
    q.add(prefix + ".ResourceType", std::string(resource));
    for (std::size_t i = 0; i < tags.size(); ++i) {
      q.add(fmt::format("{}.Tag.{}.Key", prefix, i + 1), tags[i].key);
      q.add(fmt::format("{}.Tag.{}.Value", prefix, i + 1), tags[i].value);
    }
  }
}

// application/x-www-form-urlencoded the way botocore writes it (Python's quote_plus): AWS's unreserved
// characters stay, a space is '+', everything else is %XX. Any spelling works for AWS, which hashes
// the bytes it got; moto_server, though, hashes its own re-encoding of the parsed form, so only
// botocore's spelling passes its signature check.
void form_encode_append(std::string& out, std::string_view text) {
  while (!text.empty()) {
    const auto space = text.find(' ');
    net::uri_encode_append(out, text.substr(0, space));
    if (space == std::string_view::npos) break;
    out += '+';
    text.remove_prefix(space + 1);
  }
}

void add_token(query& q, std::string_view next_token) {
  if (!next_token.empty()) q.add("NextToken", std::string(next_token));
}

}  // namespace

std::optional<std::string_view> query::param(std::string_view name) const {
  for (const auto& [n, v] : params)
    if (n == name) return v;
  return std::nullopt;
}

std::string query::form_body() const {
  std::string out = "Action=";
  form_encode_append(out, action);
  out += "&Version=";
  out += api_version;
  for (const auto& [name, value] : params) {
    out += '&';
    form_encode_append(out, name);
    out += '=';
    form_encode_append(out, value);
  }
  return out;
}

query import_key_pair(std::string_view key_name, std::string_view public_key) {
  auto q = request_for(action_types::ec2::import_key_pair);
  q.add("KeyName", std::string(key_name));
  q.add("PublicKeyMaterial", base64_encode(public_key));
  return q;
}

query run_instances(const launch_request& launch) {
  auto q = request_for(action_types::ec2::run_instances);
  q.add("ImageId", launch.image_id);
  q.add("InstanceType", launch.instance_type);
  q.add("MinCount", "1");
  q.add("MaxCount", "1");
  // A node that shuts itself down when idle (its watchdog) is gone for good, not a stopped instance
  // whose volumes still cost money.
  q.add("InstanceInitiatedShutdownBehavior", "terminate");
  if (!launch.subnet_id.empty()) q.add("SubnetId", launch.subnet_id);
  add_list(q, "SecurityGroupId", launch.security_group_ids);
  if (!launch.key_name.empty()) q.add("KeyName", launch.key_name);
  if (!launch.client_token.empty()) q.add("ClientToken", launch.client_token);
  if (launch.spot) {
    q.add("InstanceMarketOptions.MarketType", "spot");
    q.add("InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time");
    q.add("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior", "terminate");
  }
  add_tag_specifications(q, launch.tags);
  return q;
}

query describe_instances(const std::vector<std::string>& ids, const std::vector<filter>& filters,
                         std::string_view next_token, int max_results) {
  auto q = request_for(action_types::ec2::describe_instances);
  add_list(q, "InstanceId", ids);
  add_filters(q, filters);
  if (ids.empty() && max_results > 0) q.add("MaxResults", std::to_string(max_results));
  add_token(q, next_token);
  return q;
}

query terminate_instances(const std::vector<std::string>& ids) {
  auto q = request_for(action_types::ec2::terminate_instances);
  add_list(q, "InstanceId", ids);
  return q;
}

query describe_instance_types(std::string_view next_token) {
  auto q = request_for(action_types::ec2::describe_instance_types);
  q.add("MaxResults", "100");
  add_token(q, next_token);
  return q;
}

query describe_spot_price_history(std::chrono::system_clock::time_point start, std::string_view next_token) {
  auto q = request_for(action_types::ec2::describe_spot_price_history);
  // Accounts with EC2-Classic history see "Linux/UNIX (Amazon VPC)", all others "Linux/UNIX". The
  // ProductDescription parameter rather than a product-description filter: moto 5 answers any filter
  // but zone and type with nothing at all (and ignores the parameter, so make_catalogue checks again).
  add_list(q, "ProductDescription", {"Linux/UNIX", "Linux/UNIX (Amazon VPC)"});
  q.add("StartTime", iso8601(start));
  q.add("MaxResults", "1000");
  add_token(q, next_token);
  return q;
}

std::string iso8601(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[32];
  const auto n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(text, n);
}

}  // namespace ferry::provision::ec2
