#pragma once
// Times as AWS APIs write them: "2024-05-01T12:00:00.000Z" (S3's Initiated and LastModified, EC2's
// LaunchTime), always UTC.
#include <cstdint>
#include <optional>
#include <string_view>

namespace ferry::net {

// Unix seconds; nullopt when the text does not start with such a time.
std::optional<std::int64_t> unix_seconds_of(std::string_view iso8601);
// The same for an HTTP date, as in Date and Last-Modified: "Wed, 25 Nov 2026 15:55:32 GMT", or one of the
// two obsolete formats a recipient must still accept (RFC 9110 5.6.7): RFC 850's
// "Wednesday, 25-Nov-26 15:55:32 GMT" and asctime's "Wed Nov 25 15:55:32 2026".
std::optional<std::int64_t> unix_seconds_of_http_date(std::string_view date);

}  // namespace ferry::net
