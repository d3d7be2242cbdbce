#pragma once
// AWS credentials and where they come from: the environment first, then the profile's entries in the
// credentials file, then in the config file — the order of the AWS CLI for static keys. Roles, SSO,
// credential_process and instance metadata are not read here.
#include "net/aws_profile.hpp"
#include "tracing/diagnostics.hpp"

#include <string>
#include <string_view>

namespace ferry::net {

// A string that must not reach a log or an error message by accident: it has no operator<<, no
// formatter and no conversion; reveal() is the only way to the text. Its buffer is wiped on
// destruction (best effort: copies the caller made are the caller's). There are no move operations,
// so a "moved-from" secret is a copy that is wiped in its turn rather than a buffer left behind.
class secret_string {
 public:
  secret_string() = default;
  explicit secret_string(std::string value) : value_(std::move(value)) {}
  secret_string(const secret_string&) = default;
  secret_string& operator=(const secret_string&) = default;
  ~secret_string();

  std::string_view reveal() const noexcept { return value_; }
  bool empty() const noexcept { return value_.empty(); }
  bool operator==(const secret_string& other) const noexcept { return value_ == other.value_; }

 private:
  std::string value_;
};

struct credentials {
  std::string access_key_id;
  secret_string secret_access_key;
  secret_string session_token;  // empty for long-term keys
  std::string source;           // "environment", or "<file> [profile]"

  // What may be shown: the key id, where it came from, and whether a session token is present.
  std::string redacted() const;
};

// errc::no_credentials when nothing holds an access key; errc::incomplete_credentials when a key id
// comes without its secret (or a secret file entry without its key id).
result<credentials> resolve_credentials(const environment& env, const aws_profile& profile, diagnostics& diag);

}  // namespace ferry::net
