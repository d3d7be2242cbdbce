#include "net/credentials.hpp"

#include "net/error.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>

#include <array>

namespace ferry::net {
namespace {

result<credentials> from_environment(const environment& env, diagnostics& diag) {
  auto key_id = set_variable(env, "AWS_ACCESS_KEY_ID");
  if (!key_id) return make_error_code(errc::no_credentials);
  auto secret = set_variable(env, "AWS_SECRET_ACCESS_KEY");
  if (!secret) {
    diag.set("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
    return make_error_code(errc::incomplete_credentials);
  }
  auto token = set_variable(env, "AWS_SESSION_TOKEN");
  if (!token) token = set_variable(env, "AWS_SECURITY_TOKEN");  // the name older tools export
  return credentials{std::move(*key_id), secret_string(std::move(*secret)), secret_string(token.value_or("")),
                     "environment"};
}

// One profile section, in the credentials or the config file.
result<credentials> from_section(const ini_section& section, const std::filesystem::path& file,
                                 std::string_view profile, diagnostics& diag) {
  const auto get = [&](std::string_view key) -> std::optional<std::string> {
    const auto it = section.find(key);
    if (it == section.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  auto key_id = get("aws_access_key_id");
  auto secret = get("aws_secret_access_key");
  if (!key_id && !secret) return make_error_code(errc::no_credentials);
  if (!key_id || !secret) {
    diag.set(fmt::format("{} [{}]: {} without {}", file.string(), profile,
                         key_id ? "aws_access_key_id" : "aws_secret_access_key",
                         key_id ? "aws_secret_access_key" : "aws_access_key_id"));
    return make_error_code(errc::incomplete_credentials);
  }
  auto token = get("aws_session_token");
  if (!token) token = get("aws_security_token");
  return credentials{std::move(*key_id), secret_string(std::move(*secret)), secret_string(token.value_or("")),
                     fmt::format("{} [{}]", file.string(), profile)};
}

// Names a profile's unsupported credential source, so the message says why its keys were not found.
std::string unsupported_source(const aws_profile& profile) {
  static constexpr std::array<std::string_view, 5> keys = {"role_arn", "sso_session", "sso_start_url",
                                                           "credential_process", "web_identity_token_file"};
  for (const auto key : keys) {
    if (profile.config.contains(key) || profile.credentials.contains(key)) {
      return fmt::format(
          "; it uses {}, which ferry does not read: export AWS_ACCESS_KEY_ID and "
          "AWS_SECRET_ACCESS_KEY (e.g. with `aws configure export-credentials`)",
          key);
    }
  }
  return {};
}

}  // namespace

secret_string::~secret_string() {
  // Over the whole capacity, so a longer value that was overwritten by a shorter one goes too.
  value_.resize(value_.capacity());
  OPENSSL_cleanse(value_.data(), value_.size());
}

std::string credentials::redacted() const {
  return fmt::format("access key {} from {}{}", access_key_id, source,
                     session_token.empty() ? "" : " (with session token)");
}

result<credentials> resolve_credentials(const environment& env, const aws_profile& profile, diagnostics& diag) {
  auto found = from_environment(env, diag);
  if (found || found.error() != errc::no_credentials) return found;
  found = from_section(profile.credentials, profile.credentials_path, profile.name, diag);
  if (found || found.error() != errc::no_credentials) return found;
  found = from_section(profile.config, profile.config_path, profile.name, diag);
  if (found || found.error() != errc::no_credentials) return found;
  diag.set(fmt::format(
      "no AWS credentials: AWS_ACCESS_KEY_ID is unset and profile '{}' has no aws_access_key_id "
      "in {} or {}{}",
      profile.name, profile.credentials_path.empty() ? "(no credentials file)" : profile.credentials_path.string(),
      profile.config_path.empty() ? "(no config file)" : profile.config_path.string(), unsupported_source(profile)));
  return found;
}

}  // namespace ferry::net
