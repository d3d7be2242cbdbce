#pragma once
// s3://BUCKET/KEY-OR-PREFIX, as people write storage locations: storage.url, read once as the configuration
// is loaded (loader.hpp), and the URLs of a command line (`ferry storage`, --stage), read where they are parsed.
#include "tracing/diagnostics.hpp"

#include <string>
#include <string_view>

namespace ferry::config {

struct s3_url {
  std::string bucket;
  std::string key;  // may be empty (the bucket's root) or end in '/' (a prefix)

  std::string text() const { return "s3://" + bucket + "/" + key; }
};

// errc::bad_value when the text is not s3://BUCKET[/KEY] with a valid S3 bucket name; errors never show
// user info (s3://ID:SECRET@bucket).
result<s3_url> parse_s3_url(std::string_view text, diagnostics& diag);

}  // namespace ferry::config
