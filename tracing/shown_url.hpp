#pragma once
// A URL as a message may show it. Messages reach stdout, --json and traces, and a URL pasted into a setting
// or an argument can carry a password or a presigned signature; endpoints (net/) and s3:// URLs (config/)
// alike are shown through this one function.
#include <string>
#include <string_view>

namespace ferry::tracing {

// User info replaced by "***@", and the values of query parameters whose names look secret (X-Amz-*,
// signatures, tokens, passwords) by "REDACTED".
std::string shown_url(std::string_view url);

}  // namespace ferry::tracing
