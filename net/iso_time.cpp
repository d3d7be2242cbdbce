#include "net/iso_time.hpp"

#include <ctime>
#include <string>

namespace ferry::net {

std::optional<std::int64_t> unix_seconds_of(std::string_view iso8601) {
  std::tm utc{};
  const std::string text(iso8601);
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &utc);
  if (!end) return std::nullopt;
  return static_cast<std::int64_t>(::timegm(&utc));
}

std::optional<std::int64_t> unix_seconds_of_http_date(std::string_view date) {
  const std::string text(date);
  for (const char* format : {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"}) {
    std::tm utc{};
    const char* end = ::strptime(text.c_str(), format, &utc);
    if (end && *end == '\0') return static_cast<std::int64_t>(::timegm(&utc));
  }
  return std::nullopt;
}

}  // namespace ferry::net
