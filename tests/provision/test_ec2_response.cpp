// EC2's answers and errors, parsed without I/O, from documents as moto_server 5.2.1 and AWS write
// them (trimmed), and from malformed ones.
#include "net/error.hpp"
#include "provision/ec2/api_error.hpp"
#include "provision/ec2/response.hpp"
#include "provision/error.hpp"

#include <gtest/gtest.h>

namespace ferry::provision::ec2 {
namespace {

constexpr std::string_view ns = R"( xmlns="http://ec2.amazonaws.com/doc/2016-11-15/")";

std::string doc(std::string_view root, std::string_view inner) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<" + std::string(root) + std::string(ns) + ">" +
         std::string(inner) + "</" + std::string(root) + ">";
}

// An instance item as moto writes it, cut to what ferry reads plus some of what it ignores.
std::string instance_item(std::string_view id, std::string_view state, std::string_view extra = "") {
  return "<item><instanceId>" + std::string(id) +
         "</instanceId><imageId>ami-12c6146b</imageId><instanceState><code>16</code><name>" + std::string(state) +
         "</name></instanceState><privateDnsName>ip-10-200-0-4.ec2.internal</privateDnsName><reason/>"
         "<keyName>ferry-abc</keyName><amiLaunchIndex>0</amiLaunchIndex><instanceType>t3.micro</instanceType>"
         "<launchTime>2024-05-01T12:00:05.000Z</launchTime><placement><groupName/><tenancy>default</tenancy>"
         "<availabilityZone>us-east-1c</availabilityZone></placement><monitoring><state>disabled</state></monitoring>"
         "<subnetId>subnet-09cb</subnetId><vpcId>vpc-9379</vpcId><privateIpAddress>10.200.0.4</privateIpAddress>"
         "<networkInterfaceSet><item><privateIpAddress>10.200.0.99</privateIpAddress></item></networkInterfaceSet>"
         "<tagSet><item><key>ferry:managed</key><value>true</value></item><item><key>Name</key>"
         "<value>ferry-1</value></item></tagSet>" +
         std::string(extra) + "</item>";
}

// ---- errors ---------------------------------------------------------------------------------------

TEST(ec2_errors, the_ec2_error_document_is_read) {
  const auto e = find_api_error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code>"
      "<Message>The instance ID 'i-1' does not exist</Message></Error></Errors>"
      "<RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "InvalidInstanceID.NotFound");
  EXPECT_EQ(e->message, "The instance ID 'i-1' does not exist");
  EXPECT_EQ(e->request_id, "ea966190-f9aa-478e-9ede-example");
}

TEST(ec2_errors, moto_and_iam_style_error_responses_are_read_too) {
  // moto's signature check answers in this shape, whatever the service.
  const auto moto = find_api_error(
      "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<ErrorResponse><Errors><Error><Code>SignatureDoesNotMatch</Code>"
      "<Message>The request signature we calculated does not match</Message><Type>Sender</Type></Error></Errors>"
      "</ErrorResponse>");
  ASSERT_TRUE(moto);
  EXPECT_EQ(moto->code, "SignatureDoesNotMatch");
  const auto iam = find_api_error(
      "<ErrorResponse><Error><Code>AccessDenied</Code><Message>no</Message></Error><RequestId>r1</RequestId>"
      "</ErrorResponse>");
  ASSERT_TRUE(iam);
  EXPECT_EQ(iam->code, "AccessDenied");
  EXPECT_EQ(iam->request_id, "r1");
}

TEST(ec2_errors, bodies_that_are_no_error_document_give_none) {
  for (std::string_view body : {"", "not xml", "<Response><Errors></Errors></Response>",
                                "<Response><Errors><Error><Message>m</Message></Error></Errors></Response>",
                                "<DescribeInstancesResponse/>", "<Response><Errors><Error><Code>X</Code>"})
    EXPECT_FALSE(find_api_error(body)) << body;
}

struct mapped {
  int status;
  std::string code;
  error_code expected;
  std::string_view words;  // the message must say this
};

class ec2_failure : public ::testing::TestWithParam<mapped> {};

TEST_P(ec2_failure, maps_to_the_right_code_and_names_the_call) {
  const auto& m = GetParam();
  diagnostics diag;
  const auto ec = api_failure(m.status, api_error{m.code, "EC2's own words", "req-7"},
                              {"TerminateInstances", "i-0abc", "http://127.0.0.1:5000"}, diag);
  EXPECT_EQ(ec, m.expected) << ec.message();
  EXPECT_NE(diag.message.find("TerminateInstances of i-0abc"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("http://127.0.0.1:5000"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find(m.words), std::string::npos) << diag.message;
}

INSTANTIATE_TEST_SUITE_P(
    codes, ec2_failure,
    ::testing::Values(
        mapped{503, "RequestLimitExceeded", make_error_code(net::errc::throttled), "throttling"},
        mapped{400, "Throttling", make_error_code(net::errc::throttled), "throttling"},
        mapped{500, "InternalError", make_error_code(net::errc::server_error), "EC2 failed"},
        mapped{503, "Unavailable", make_error_code(net::errc::server_error), "EC2 failed"},
        mapped{403, "SignatureDoesNotMatch", make_error_code(net::errc::access_denied), "secret access key"},
        mapped{401, "AuthFailure", make_error_code(net::errc::access_denied), "secret access key"},
        mapped{403, "InvalidClientTokenId", make_error_code(net::errc::access_denied), "AWS_ACCESS_KEY_ID"},
        mapped{400, "RequestExpired", make_error_code(net::errc::access_denied), "clock"},
        mapped{400, "ExpiredToken", make_error_code(net::errc::access_denied), "session token"},
        mapped{403, "UnauthorizedOperation", make_error_code(net::errc::access_denied), "IAM policy"},
        mapped{400, "InvalidInstanceID.NotFound", make_error_code(errc::node_not_found), "no such instance"},
        mapped{400, "InvalidInstanceID.Malformed", make_error_code(errc::node_not_found), "no such instance"},
        mapped{400, "InvalidKeyPair.Duplicate", make_error_code(errc::already_exists), "InvalidKeyPair.Duplicate"},
        mapped{400, "InsufficientInstanceCapacity", make_error_code(errc::provider_failed), "EC2's own words"},
        mapped{400, "InvalidAMIID.NotFound", make_error_code(errc::provider_failed), "InvalidAMIID.NotFound"}),
    [](const auto& p) {
      std::string name = p.param.code;
      for (auto& c : name)
        if (c == '.') c = '_';
      return name;
    });

TEST(ec2_errors, a_failure_without_an_error_document_goes_by_status) {
  diagnostics diag;
  const call_info call{"RunInstances", "", "https://ec2.us-east-1.amazonaws.com"};
  EXPECT_EQ(api_failure(503, std::nullopt, call, diag), make_error_code(net::errc::throttled));
  EXPECT_EQ(api_failure(502, std::nullopt, call, diag), make_error_code(net::errc::server_error));
  EXPECT_EQ(api_failure(403, std::nullopt, call, diag), make_error_code(net::errc::access_denied));
  EXPECT_EQ(api_failure(404, std::nullopt, call, diag), make_error_code(errc::provider_failed));
  EXPECT_NE(diag.message.find("RunInstances failed with HTTP 404"), std::string::npos) << diag.message;
}

// ---- ImportKeyPair --------------------------------------------------------------------------------

TEST(ec2_responses, import_key_pair) {
  diagnostics diag;
  const auto k = parse_import_key_pair(
      doc("ImportKeyPairResponse", "<keyFingerprint>e0:28:ed</keyFingerprint><keyName>ferry-abc</keyName>"
                                   "<keyPairId>key-0649</keyPairId><tagSet/><requestId>request-id</requestId>"),
      diag);
  ASSERT_TRUE(k) << diag.message;
  EXPECT_EQ(k->name, "ferry-abc");
  EXPECT_EQ(k->fingerprint, "e0:28:ed");
  EXPECT_FALSE(parse_import_key_pair(doc("ImportKeyPairResponse", "<keyFingerprint>x</keyFingerprint>"), diag));
  EXPECT_NE(diag.message.find("no <keyName>"), std::string::npos) << diag.message;
}

// ---- RunInstances ---------------------------------------------------------------------------------

TEST(ec2_responses, run_instances_reads_ids_addresses_zone_lifecycle_and_tags) {
  diagnostics diag;
  const auto r = parse_run_instances(
      doc("RunInstancesResponse",
          "<reservationId>r-0f2c</reservationId><ownerId>123456789012</ownerId><groupSet/><instancesSet>" +
              instance_item("i-ccd95feafe8939ebc", "pending", "<instanceLifecycle>spot</instanceLifecycle>") +
              "</instancesSet>"),
      diag);
  ASSERT_TRUE(r) << diag.message;
  ASSERT_EQ(r->size(), 1u);
  const auto& i = r->front();
  EXPECT_EQ(i.id, "i-ccd95feafe8939ebc");
  EXPECT_EQ(i.state, "pending");
  EXPECT_EQ(i.type, "t3.micro");
  EXPECT_EQ(i.availability_zone, "us-east-1c");
  EXPECT_EQ(i.private_ip, "10.200.0.4") << "the instance's own address, not an interface's";
  EXPECT_EQ(i.public_ip, "");
  EXPECT_EQ(i.subnet_id, "subnet-09cb");
  EXPECT_EQ(i.vpc_id, "vpc-9379");
  EXPECT_EQ(i.image_id, "ami-12c6146b");
  EXPECT_EQ(i.key_name, "ferry-abc");
  EXPECT_EQ(i.lifecycle, "spot");
  EXPECT_EQ(i.launch_time, "2024-05-01T12:00:05.000Z");
  EXPECT_EQ(i.tags, (std::map<std::string, std::string>{{"ferry:managed", "true"}, {"Name", "ferry-1"}}));
}

TEST(ec2_responses, run_instances_without_instances_or_ids_is_a_bad_response) {
  diagnostics diag;
  EXPECT_EQ(parse_run_instances(doc("RunInstancesResponse", "<instancesSet/>"), diag).error(),
            make_error_code(net::errc::bad_response));
  EXPECT_NE(diag.message.find("holds no instance"), std::string::npos) << diag.message;
  EXPECT_FALSE(parse_run_instances(doc("RunInstancesResponse", "<instancesSet><item><instanceType>t3.micro"
                                                               "</instanceType></item></instancesSet>"),
                                   diag));
  EXPECT_NE(diag.message.find("without <instanceId>"), std::string::npos) << diag.message;
}

// ---- DescribeInstances ----------------------------------------------------------------------------

TEST(ec2_responses, describe_instances_flattens_reservations_and_keeps_the_next_token) {
  diagnostics diag;
  const auto page = parse_describe_instances(
      doc("DescribeInstancesResponse",
          "<requestId>x</requestId><reservationSet><item><reservationId>r-1</reservationId><instancesSet>" +
              instance_item("i-1", "running", "<ipAddress>54.1.2.3</ipAddress>") + instance_item("i-2", "stopped") +
              "</instancesSet></item><item><reservationId>r-2</reservationId><instancesSet>" +
              instance_item("i-3", "terminated",
                            "<stateReason><code>Client.UserInitiatedShutdown</code><message>"
                            "Client.UserInitiatedShutdown: User initiated shutdown</message></stateReason>") +
              "</instancesSet></item></reservationSet><nextToken>r-2</nextToken>"),
      diag);
  ASSERT_TRUE(page) << diag.message;
  ASSERT_EQ(page->instances.size(), 3u);
  EXPECT_EQ(page->instances[0].public_ip, "54.1.2.3");
  EXPECT_EQ(page->instances[1].state, "stopped");
  EXPECT_EQ(page->instances[2].id, "i-3");
  EXPECT_EQ(page->instances[2].state_reason, "Client.UserInitiatedShutdown: User initiated shutdown");
  EXPECT_EQ(page->next_token, "r-2");
}

TEST(ec2_responses, an_empty_describe_instances_is_an_empty_last_page) {
  diagnostics diag;
  const auto page = parse_describe_instances(doc("DescribeInstancesResponse", "<reservationSet/>"), diag);
  ASSERT_TRUE(page) << diag.message;
  EXPECT_TRUE(page->instances.empty());
  EXPECT_TRUE(page->next_token.empty());
}

// ---- TerminateInstances ---------------------------------------------------------------------------

TEST(ec2_responses, terminate_instances_reports_state_changes) {
  diagnostics diag;
  const auto r = parse_terminate_instances(
      doc("TerminateInstancesResponse",
          "<instancesSet><item><instanceId>i-ccd9</instanceId><currentState><code>32</code><name>shutting-down"
          "</name></currentState><previousState><code>16</code><name>running</name></previousState></item>"
          "</instancesSet><requestId>request-id</requestId>"),
      diag);
  ASSERT_TRUE(r) << diag.message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].id, "i-ccd9");
  EXPECT_EQ((*r)[0].current, "shutting-down");
  EXPECT_EQ((*r)[0].previous, "running");
}

// ---- DescribeInstanceTypes ------------------------------------------------------------------------

std::string type_item(std::string_view name, std::string_view vcpus, std::string_view mib,
                      std::string_view arch = "x86_64") {
  return "<item><instanceType>" + std::string(name) +
         "</instanceType><currentGeneration>true</currentGeneration><supportedUsageClasses><item>on-demand</item>"
         "<item>spot</item></supportedUsageClasses><processorInfo><supportedArchitectures><item>" +
         std::string(arch) +
         "</item></supportedArchitectures><sustainedClockSpeedInGhz>3.5</sustainedClockSpeedInGhz></processorInfo>"
         "<vCpuInfo><defaultVCpus>" +
         std::string(vcpus) + "</defaultVCpus><defaultCores>1</defaultCores></vCpuInfo><memoryInfo><sizeInMiB>" +
         std::string(mib) + "</sizeInMiB></memoryInfo></item>";
}

TEST(ec2_responses, describe_instance_types_reads_cpus_memory_architectures_and_usage) {
  diagnostics diag;
  const auto page = parse_describe_instance_types(
      doc("DescribeInstanceTypesResponse", "<instanceTypeSet>" + type_item("c6i.large", "2", "4096") +
                                               type_item("m6g.xlarge", "4", "16384", "arm64") +
                                               "</instanceTypeSet><nextToken>abc</nextToken>"),
      diag);
  ASSERT_TRUE(page) << diag.message;
  ASSERT_EQ(page->types.size(), 2u);
  const auto& t = page->types[0];
  EXPECT_EQ(t.name, "c6i.large");
  EXPECT_EQ(t.vcpus, 2);
  EXPECT_EQ(t.memory_mib, 4096);
  EXPECT_EQ(t.architectures, std::vector<std::string>{"x86_64"});
  EXPECT_EQ(t.usage_classes, (std::vector<std::string>{"on-demand", "spot"}));
  EXPECT_TRUE(t.current_generation);
  EXPECT_EQ(page->types[1].architectures, std::vector<std::string>{"arm64"});
  EXPECT_EQ(page->next_token, "abc");
}

TEST(ec2_responses, an_instance_type_without_numbers_is_a_bad_response_naming_it) {
  diagnostics diag;
  const auto r = parse_describe_instance_types(
      doc("DescribeInstanceTypesResponse",
          "<instanceTypeSet>" + type_item("x1.huge", "many", "4096") + "</instanceTypeSet>"),
      diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(net::errc::bad_response));
  EXPECT_NE(diag.message.find("x1.huge"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("'many'"), std::string::npos) << diag.message;
}

// ---- DescribeSpotPriceHistory ---------------------------------------------------------------------

TEST(ec2_responses, describe_spot_price_history_reads_prices) {
  diagnostics diag;
  const auto page = parse_describe_spot_price_history(
      doc("DescribeSpotPriceHistoryResponse",
          "<spotPriceHistorySet><item><availabilityZone>us-east-1a</availabilityZone><instanceType>m5.large"
          "</instanceType><productDescription>Linux/UNIX (Amazon VPC)</productDescription><spotPrice>0.035100"
          "</spotPrice><timestamp>2024-05-01T11:58:00.000Z</timestamp></item></spotPriceHistorySet>"
          "<nextToken>n2</nextToken>"),
      diag);
  ASSERT_TRUE(page) << diag.message;
  ASSERT_EQ(page->prices.size(), 1u);
  EXPECT_EQ(page->prices[0].instance_type, "m5.large");
  EXPECT_EQ(page->prices[0].availability_zone, "us-east-1a");
  EXPECT_DOUBLE_EQ(page->prices[0].price, 0.0351);
  EXPECT_EQ(page->prices[0].timestamp, "2024-05-01T11:58:00.000Z");
  EXPECT_EQ(page->next_token, "n2");
}

TEST(ec2_responses, a_spot_price_that_is_no_number_is_a_bad_response) {
  diagnostics diag;
  EXPECT_FALSE(parse_describe_spot_price_history(
      doc("DescribeSpotPriceHistoryResponse",
          "<spotPriceHistorySet><item><instanceType>m5.large</instanceType><spotPrice>cheap</spotPrice></item>"
          "</spotPriceHistorySet>"),
      diag));
  EXPECT_NE(diag.message.find("m5.large"), std::string::npos) << diag.message;
}

// ---- documents that are not the answer ------------------------------------------------------------

TEST(ec2_responses, malformed_xml_names_the_action_and_where_it_broke) {
  diagnostics diag;
  const auto r = parse_describe_instances("<DescribeInstancesResponse><reservationSet><item>", diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(net::errc::bad_response));
  EXPECT_NE(diag.message.find("DescribeInstances response is not valid XML"), std::string::npos) << diag.message;
  EXPECT_FALSE(parse_terminate_instances("", diag));
  EXPECT_NE(diag.message.find("TerminateInstances"), std::string::npos) << diag.message;
}

TEST(ec2_responses, another_document_is_named) {
  diagnostics diag;
  EXPECT_FALSE(parse_run_instances(doc("DescribeInstancesResponse", ""), diag));
  EXPECT_NE(diag.message.find("<DescribeInstancesResponse> document, not <RunInstancesResponse>"), std::string::npos)
      << diag.message;
  EXPECT_FALSE(parse_describe_instance_types(
      "<Response><Errors><Error><Code>UnsupportedOperation</Code><Message>no</Message></Error></Errors></Response>",
      diag));
  EXPECT_NE(diag.message.find("EC2 error: UnsupportedOperation"), std::string::npos) << diag.message;
}

}  // namespace
}  // namespace ferry::provision::ec2
