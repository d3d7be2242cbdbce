#pragma once
// The EC2 Query API responses ferry reads, parsed without any I/O. EC2 answers in XML under the
// namespace http://ec2.amazonaws.com/doc/2016-11-15/, lists as <xxxSet><item>...</item></xxxSet>, and
// pages with <nextToken>. A parser returns net::errc::bad_response, with a diagnostic naming the
// Action, when the body is not the document that Action answers with; an error document (see
// api_error.hpp) handed to a parser is reported the same way, naming its code.
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::provision::ec2 {

struct key_pair_info {
  std::string name;
  std::string fingerprint;
};

result<key_pair_info> parse_import_key_pair(std::string_view body, diagnostics& diag);

struct instance {
  std::string id;
  std::string type;
  std::string state;            // pending, running, shutting-down, terminated, stopping, stopped
  std::string state_reason;     // e.g. "Server.SpotInstanceTermination: ..." when EC2 gives one
  std::string availability_zone;
  std::string private_ip;
  std::string public_ip;
  std::string subnet_id;
  std::string vpc_id;
  std::string image_id;
  std::string key_name;
  std::string lifecycle;        // "spot" for spot instances, empty for on-demand
  std::string launch_time;      // ISO 8601
  std::map<std::string, std::string> tags;
};

// RunInstances: the instances of the new reservation.
result<std::vector<instance>> parse_run_instances(std::string_view body, diagnostics& diag);

struct instances_page {
  std::vector<instance> instances;  // every reservation's instances, in order
  std::string next_token;           // empty on the last page
};

result<instances_page> parse_describe_instances(std::string_view body, diagnostics& diag);

struct state_change {
  std::string id;
  std::string current;   // "shutting-down", "terminated"
  std::string previous;
};

result<std::vector<state_change>> parse_terminate_instances(std::string_view body, diagnostics& diag);

struct instance_type_info {
  std::string name;                        // "m5.large"
  int vcpus = 0;                           // defaultVCpus
  std::int64_t memory_mib = 0;
  std::vector<std::string> architectures;  // "x86_64", "arm64", "i386", "x86_64_mac"
  std::vector<std::string> usage_classes;  // "on-demand", "spot"
  bool current_generation = false;
};

struct instance_types_page {
  std::vector<instance_type_info> types;
  std::string next_token;
};

result<instance_types_page> parse_describe_instance_types(std::string_view body, diagnostics& diag);

struct spot_price {
  std::string instance_type;
  std::string availability_zone;
  std::string product_description;
  double price = 0;        // USD per hour
  std::string timestamp;   // ISO 8601: when this price took effect
};

struct spot_prices_page {
  std::vector<spot_price> prices;
  std::string next_token;
};

result<spot_prices_page> parse_describe_spot_price_history(std::string_view body, diagnostics& diag);

}  // namespace ferry::provision::ec2
