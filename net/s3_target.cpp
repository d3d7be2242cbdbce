#include "net/s3_target.hpp"

namespace ferry::net {

result<s3_target> resolve_s3_target(const config::storage_settings& storage, const environment& env,
                                    diagnostics& diag) {
  auto profile = load_aws_profile(env, diag);
  if (!profile) return profile.error();
  s3_target target;
  target.region = storage.region.empty() ? resolve_region(env, *profile) : storage.region;
  auto configured = resolve_endpoint("s3", storage.endpoint, env, *profile, diag);
  if (!configured) return configured.error();
  target.at = configured->value_or(aws_endpoint("s3", target.region));
  target.node_at = target.at;
  if (!storage.node_endpoint.empty()) {
    auto node = parse_endpoint(storage.node_endpoint, diag);
    if (!node) {
      diag.set("storage.node_endpoint: " + diag.message);
      return node.error();
    }
    target.node_at = *node;
  }
  auto style = resolve_addressing_style(storage.addressing, *profile, diag);
  if (!style) return style.error();
  target.style = *style;
  auto creds = resolve_credentials(env, *profile, diag);
  if (!creds) return creds.error();
  target.creds = std::move(*creds);
  return target;
}

}  // namespace ferry::net
