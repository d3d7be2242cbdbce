// Every EC2 API response parser on hostile bodies: the endpoint, or anything between ferry and it, writes
// these bytes. A parser may refuse them but never crash.
#include "provision/ec2/api_error.hpp"
#include "provision/ec2/response.hpp"

#include <cstdint>
#include <string_view>

namespace ec2 = ferry::provision::ec2;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  ferry::diagnostics diag;

  const auto error = ec2::find_api_error(body);
  for (int status : {200, 400, 401, 403, 500, 503}) {
    diag.clear();
    (void)ec2::api_failure(status, error, {"RunInstances", "i-0123", "http://127.0.0.1:1"}, diag);
  }
  (void)ec2::parse_import_key_pair(body, diag);
  (void)ec2::parse_run_instances(body, diag);
  (void)ec2::parse_describe_instances(body, diag);
  (void)ec2::parse_terminate_instances(body, diag);
  (void)ec2::parse_describe_instance_types(body, diag);
  (void)ec2::parse_describe_spot_price_history(body, diag);
  return 0;
}
