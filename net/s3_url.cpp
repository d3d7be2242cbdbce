#include "net/s3_url.hpp"

#include "net/error.hpp"

#include <fmt/format.h>

namespace ferry::net {

result<s3_url> parse_s3_url(std::string_view text, diagnostics& diag) {
  constexpr std::string_view scheme = "s3://";
  if (text.substr(0, scheme.size()) != scheme) {
    diag.set(fmt::format("'{}' is not an s3:// URL (expected s3://BUCKET/KEY)", text));
    return make_error_code(errc::bad_endpoint);
  }
  const auto rest = text.substr(scheme.size());
  const auto slash = rest.find('/');
  s3_url url{std::string(rest.substr(0, slash)), slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1))};
  if (url.bucket.empty()) {
    diag.set(fmt::format("'{}' names no bucket (expected s3://BUCKET/KEY)", text));
    return make_error_code(errc::bad_endpoint);
  }
  return url;
}

}  // namespace ferry::net
