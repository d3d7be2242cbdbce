#pragma once
// The EC2 Query API requests ferry sends, built without any I/O. A request is an Action, the API
// Version and a list of parameters, sent as an application/x-www-form-urlencoded POST body. Lists are
// flattened the Query way: InstanceId.1, InstanceId.2, ...; Filter.1.Name with Filter.1.Value.1;
// TagSpecification.1.Tag.1.Key. Parameters keep the order they were added in, so bodies (and tests) are
// deterministic.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::provision::ec2 {

inline constexpr std::string_view api_version = "2016-11-15";

struct query {
  std::string action;                                      // "RunInstances"
  std::vector<std::pair<std::string, std::string>> params;  // without Action and Version

  void add(std::string name, std::string value) { params.emplace_back(std::move(name), std::move(value)); }
  // The value of the first parameter of that name, for tests and traces.
  std::optional<std::string_view> param(std::string_view name) const;
  // "Action=...&Version=2016-11-15&..." with every name and value form-encoded as botocore does it:
  // AWS's unreserved characters kept, a space as '+', any other byte as %XX.
  std::string form_body() const;
};

struct tag {
  std::string key;
  std::string value;
};

struct filter {
  std::string name;  // "tag:ferry:managed", "instance-state-name"
  std::vector<std::string> values;
};

// ImportKeyPair: `public_key` is the OpenSSH line ("ssh-ed25519 AAAA... comment"); the API wants it
// base64-encoded once more, as the Query protocol sends blobs.
query import_key_pair(std::string_view key_name, std::string_view public_key);

// One instance to launch. RunInstances starts exactly one (MinCount = MaxCount = 1), so that each node
// gets its own Name and ferry:node-id tags at launch, and `client_token` makes a retried request
// idempotent instead of launching a second machine. A shutdown from inside the instance terminates it.
struct launch_request {
  std::string image_id;
  std::string instance_type;
  std::string subnet_id;                        // optional
  std::vector<std::string> security_group_ids;  // optional
  std::string key_name;                         // optional
  std::string client_token;                     // optional, at most 64 ASCII characters
  bool spot = false;                            // one-time spot request, terminated on interruption
  std::vector<tag> tags;                        // on the instance and its volumes
};

query run_instances(const launch_request& launch);

// DescribeInstances by ids, or by filters, one page. An empty `next_token` asks for the first page.
// `max_results` (5 to 1000) may only be sent without ids, as the API requires.
query describe_instances(const std::vector<std::string>& ids, const std::vector<filter>& filters,
                         std::string_view next_token, int max_results = 0);

query terminate_instances(const std::vector<std::string>& ids);

// DescribeInstanceTypes, one page of at most 100 (the API's limit).
query describe_instance_types(std::string_view next_token);

// DescribeSpotPriceHistory for Linux in a VPC, from `start` (the price in effect at that moment: pass
// now), one page of at most 1000.
query describe_spot_price_history(std::chrono::system_clock::time_point start, std::string_view next_token);

// "2024-05-01T12:00:00Z"
std::string iso8601(std::chrono::system_clock::time_point t);

}  // namespace ferry::provision::ec2
