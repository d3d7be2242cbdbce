#pragma once
// Which EC2 to talk to, and as whom: endpoint, region and credentials, from [ec2] first and then the AWS
// way, as for S3: AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL, the profile's [services] section and
// endpoint_url; AWS_REGION, AWS_DEFAULT_REGION, the profile's region, then us-east-1; credentials from
// the environment or the profile.
#include "config/settings.hpp"
#include "net/aws_profile.hpp"
#include "net/credentials.hpp"
#include "net/endpoint.hpp"

namespace ferry::provision::ec2 {

struct target {
  net::endpoint at;
  std::string region;
  net::credentials creds;
};

result<target> resolve_target(const config::ec2_settings& ec2, const net::environment& env, diagnostics& diag);

}  // namespace ferry::provision::ec2
