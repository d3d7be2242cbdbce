#pragma once
// Percent-encoding by AWS's rules, which are stricter than RFC 3986's "safe" sets: only the
// unreserved characters A-Z a-z 0-9 - _ . ~ stay; every other byte becomes %XX with uppercase hex.
// S3 object keys keep their '/' so a key's "directories" stay path segments.
#include <string>
#include <string_view>

namespace ferry::net {

enum class slash { encode, keep };

void uri_encode_append(std::string& out, std::string_view text, slash mode = slash::encode);
std::string uri_encode(std::string_view text, slash mode = slash::encode);

// Decodes %XX; anything else, including '+', stays as it is. A malformed escape is kept literally.
std::string uri_decode(std::string_view text);

}  // namespace ferry::net
