// The EC2 Query requests, built without I/O: every Action's parameters, the Query way of flattening
// lists, and the form encoding of the body.
#include "provision/ec2/query.hpp"

#include <boost/beast/core/detail/base64.hpp>
#include <gtest/gtest.h>

namespace ferry::provision::ec2 {
namespace {

using namespace std::chrono_literals;
using params = std::vector<std::pair<std::string, std::string>>;

TEST(ec2_query, the_form_body_starts_with_action_and_version_and_is_encoded_as_botocore_does) {
  query q{"DescribeInstances", {}};
  q.add("Filter.1.Name", "tag:ferry:managed");
  q.add("Filter.1.Value.1", "a b/c+d=e&f~g (h)%20");
  // Python: urllib.parse.urlencode([("Filter.1.Value.1", "a b/c+d=e&f~g (h)%20")])
  EXPECT_EQ(q.form_body(),
            "Action=DescribeInstances&Version=2016-11-15&Filter.1.Name=tag%3Aferry%3Amanaged"
            "&Filter.1.Value.1=a+b%2Fc%2Bd%3De%26f~g+%28h%29%2520");
}

TEST(ec2_query, import_key_pair_sends_the_key_line_base64_encoded) {
  const std::string key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGqk ferry@host";
  const auto q = import_key_pair("ferry-0123456789abcdef", key);
  EXPECT_EQ(q.action, "ImportKeyPair");
  EXPECT_EQ(q.param("KeyName"), "ferry-0123456789abcdef");
  const std::string material(*q.param("PublicKeyMaterial"));
  std::string decoded(boost::beast::detail::base64::decoded_size(material.size()), '\0');
  const auto [written, read] = boost::beast::detail::base64::decode(decoded.data(), material.data(), material.size());
  decoded.resize(written);
  EXPECT_EQ(decoded, key);
}

TEST(ec2_query, run_instances_launches_one_with_tags_subnet_groups_key_and_token) {
  launch_request r;
  r.image_id = "ami-123";
  r.instance_type = "c6i.large";
  r.subnet_id = "subnet-9";
  r.security_group_ids = {"sg-1", "sg-2"};
  r.key_name = "ferry-abc";
  r.client_token = "ferry-0001-1";
  r.tags = {{"ferry:managed", "true"}, {"ferry:node-id", "ferry-0001-1"}, {"Name", "ferry-0001-1"}};
  const auto q = run_instances(r);
  const params expected = {
      {"ImageId", "ami-123"},
      {"InstanceType", "c6i.large"},
      {"MinCount", "1"},
      {"MaxCount", "1"},
      {"InstanceInitiatedShutdownBehavior", "terminate"},
      {"SubnetId", "subnet-9"},
      {"SecurityGroupId.1", "sg-1"},
      {"SecurityGroupId.2", "sg-2"},
      {"KeyName", "ferry-abc"},
      {"ClientToken", "ferry-0001-1"},
      {"TagSpecification.1.ResourceType", "instance"},
      {"TagSpecification.1.Tag.1.Key", "ferry:managed"},
      {"TagSpecification.1.Tag.1.Value", "true"},
      {"TagSpecification.1.Tag.2.Key", "ferry:node-id"},
      {"TagSpecification.1.Tag.2.Value", "ferry-0001-1"},
      {"TagSpecification.1.Tag.3.Key", "Name"},
      {"TagSpecification.1.Tag.3.Value", "ferry-0001-1"},
      {"TagSpecification.2.ResourceType", "volume"},
      {"TagSpecification.2.Tag.1.Key", "ferry:managed"},
      {"TagSpecification.2.Tag.1.Value", "true"},
      {"TagSpecification.2.Tag.2.Key", "ferry:node-id"},
      {"TagSpecification.2.Tag.2.Value", "ferry-0001-1"},
      {"TagSpecification.2.Tag.3.Key", "Name"},
      {"TagSpecification.2.Tag.3.Value", "ferry-0001-1"},
  };
  EXPECT_EQ(q.action, "RunInstances");
  EXPECT_EQ(q.params, expected);
  EXPECT_FALSE(q.param("InstanceMarketOptions.MarketType"));
}

TEST(ec2_query, run_instances_asks_for_spot_through_instance_market_options) {
  launch_request r;
  r.image_id = "ami-1";
  r.instance_type = "m5.large";
  r.spot = true;
  const auto q = run_instances(r);
  EXPECT_EQ(q.param("InstanceMarketOptions.MarketType"), "spot");
  EXPECT_EQ(q.param("InstanceMarketOptions.SpotOptions.SpotInstanceType"), "one-time");
  EXPECT_EQ(q.param("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"), "terminate");
  // Nothing optional that was not asked for.
  for (const char* absent :
       {"SubnetId", "KeyName", "ClientToken", "SecurityGroupId.1", "TagSpecification.1.ResourceType"})
    EXPECT_FALSE(q.param(absent)) << absent;
}

TEST(ec2_query, describe_instances_by_ids_sends_no_max_results) {
  const auto q = describe_instances({"i-1", "i-2"}, {}, "", 1000);
  const params expected = {{"InstanceId.1", "i-1"}, {"InstanceId.2", "i-2"}};
  EXPECT_EQ(q.params, expected);
}

TEST(ec2_query, describe_instances_by_filters_pages_with_max_results_and_next_token) {
  const std::vector<filter> filters = {{"tag:ferry:managed", {"true"}},
                                       {"instance-state-name", {"pending", "running"}}};
  const auto q = describe_instances({}, filters, "token-2", 1000);
  const params expected = {{"Filter.1.Name", "tag:ferry:managed"},   {"Filter.1.Value.1", "true"},
                           {"Filter.2.Name", "instance-state-name"}, {"Filter.2.Value.1", "pending"},
                           {"Filter.2.Value.2", "running"},          {"MaxResults", "1000"},
                           {"NextToken", "token-2"}};
  EXPECT_EQ(q.params, expected);
}

TEST(ec2_query, terminate_instances_lists_the_ids) {
  const auto q = terminate_instances({"i-a", "i-b", "i-c"});
  EXPECT_EQ(q.form_body(),
            "Action=TerminateInstances&Version=2016-11-15&InstanceId.1=i-a&InstanceId.2=i-b&InstanceId.3=i-c");
}

TEST(ec2_query, describe_instance_types_pages_by_100) {
  EXPECT_EQ(describe_instance_types("").params, (params{{"MaxResults", "100"}}));
  EXPECT_EQ(describe_instance_types("t").params, (params{{"MaxResults", "100"}, {"NextToken", "t"}}));
}

TEST(ec2_query, describe_spot_price_history_asks_for_linux_prices_in_effect_now) {
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1714564800));  // 2024-05-01 12:00
  const auto q = describe_spot_price_history(now, "next");
  const params expected = {{"ProductDescription.1", "Linux/UNIX"},
                           {"ProductDescription.2", "Linux/UNIX (Amazon VPC)"},
                           {"StartTime", "2024-05-01T12:00:00Z"},
                           {"MaxResults", "1000"},
                           {"NextToken", "next"}};
  EXPECT_EQ(q.action, "DescribeSpotPriceHistory");
  EXPECT_EQ(q.params, expected);
}

TEST(ec2_query, iso8601_is_utc_to_the_second) {
  EXPECT_EQ(iso8601(std::chrono::system_clock::time_point(0s)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(iso8601(std::chrono::system_clock::time_point(86399s + 500ms)), "1970-01-01T23:59:59Z");
}

}  // namespace
}  // namespace ferry::provision::ec2
