#pragma once
// Which S3 to talk to, and as whom: endpoint, the endpoint nodes see (for presigned URLs), region,
// addressing style and credentials, from ferry's storage settings first and then the AWS way
// (environment, ~/.aws files).
#include "config/settings.hpp"
#include "net/aws_profile.hpp"
#include "net/credentials.hpp"
#include "net/endpoint.hpp"

namespace ferry::net {

struct s3_target {
  endpoint at;
  endpoint node_at;  // the same as `at` unless storage.node_endpoint says otherwise
  std::string region;
  addressing_style style = addressing_style::automatic;
  credentials creds;
};

result<s3_target> resolve_s3_target(const config::storage_settings& storage, const environment& env,
                                    diagnostics& diag);

}  // namespace ferry::net
