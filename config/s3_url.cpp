#include "config/s3_url.hpp"

#include "config/error.hpp"
#include "tracing/shown_url.hpp"

#include <fmt/format.h>

namespace ferry::config {
namespace {

// S3's rule for bucket names (3 to 63 of a-z 0-9 '.' '-', starting and ending with a letter or digit).
// Checked here so that a URL such as s3://KEYID:SECRET@bucket/prefix is refused before anything uses (and
// echoes) the "bucket" in front of the '@'.
bool is_bucket_name(std::string_view name) {
  if (name.size() < 3 || name.size() > 63) return false;
  const auto edge_ok = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!edge_ok(name.front()) || !edge_ok(name.back())) return false;
  for (const char c : name)
    if (!edge_ok(c) && c != '.' && c != '-') return false;
  return true;
}

// The bucket as a message may show it: whatever came before an '@' may be a key id and secret.
std::string shown_bucket(std::string_view bucket) {
  const auto at = bucket.rfind('@');
  return at == std::string_view::npos ? std::string(bucket) : fmt::format("***@{}", bucket.substr(at + 1));
}

}  // namespace

result<s3_url> parse_s3_url(std::string_view text, diagnostics& diag) {
  constexpr std::string_view scheme = "s3://";
  if (text.substr(0, scheme.size()) != scheme) {
    diag.set(fmt::format("'{}' is not an s3:// URL (expected s3://BUCKET/KEY)", tracing::shown_url(text)));
    return make_error_code(errc::bad_value);
  }
  const auto rest = text.substr(scheme.size());
  const auto slash = rest.find('/');
  s3_url url{std::string(rest.substr(0, slash)), slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1))};
  if (url.bucket.empty()) {
    diag.set(fmt::format("'{}' names no bucket (expected s3://BUCKET/KEY)", tracing::shown_url(text)));
    return make_error_code(errc::bad_value);
  }
  if (!is_bucket_name(url.bucket)) {
    const bool userinfo = url.bucket.find('@') != std::string::npos;
    diag.set(fmt::format("'{}': '{}' is not an S3 bucket name (3 to 63 characters of a-z, 0-9, '.' and '-'){}",
                         tracing::shown_url(text), shown_bucket(url.bucket),
                         userinfo ? "; user info is not allowed: credentials come from AWS settings" : ""));
    return make_error_code(errc::bad_value);
  }
  return url;
}

}  // namespace ferry::config
