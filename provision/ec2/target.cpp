#include "provision/ec2/target.hpp"

namespace ferry::provision::ec2 {

result<target> resolve_target(const config::ec2_settings& ec2, const net::environment& env, diagnostics& diag) {
  auto profile = net::load_aws_profile(env, diag);
  if (!profile) return profile.error();
  target out;
  out.region = ec2.region.empty() ? net::resolve_region(env, *profile) : ec2.region;
  auto configured = net::resolve_endpoint("ec2", ec2.endpoint, env, *profile, diag);
  if (!configured) {
    if (!ec2.endpoint.empty()) diag.set("ec2.endpoint: " + diag.message);
    return configured.error();
  }
  out.at = configured->value_or(net::aws_endpoint("ec2", out.region));
  auto creds = net::resolve_credentials(env, *profile, diag);
  if (!creds) return creds.error();
  out.creds = std::move(*creds);
  return out;
}

}  // namespace ferry::provision::ec2
