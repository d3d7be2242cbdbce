#pragma once
// INI files as AWS tools read ~/.aws/credentials and ~/.aws/config: [section] headers, "key = value"
// lines, whole-line comments starting with # or ;, key names folded to lowercase. An indented line
// under a key with an empty value is a nested setting stored as "parent.child" (config's
// "s3 =\n  addressing_style = path"); under a key with a value it continues that value. "Under"
// means indented deeper than the key, so keys that are all indented alike stay separate.
#include "tracing/diagnostics.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::net {

using ini_section = std::map<std::string, std::string, std::less<>>;

struct ini_document {
  std::map<std::string, ini_section, std::less<>> sections;

  const ini_section* find(std::string_view section) const;
  std::optional<std::string_view> get(std::string_view section, std::string_view key) const;
};

// `source` names the text in messages ("/root/.aws/config:7: ..."). A repeated section merges into
// the first, a repeated key keeps the last value. Malformed lines are errc::bad_credentials_file;
// the message names the file and line but never quotes the line, which may hold a secret.
result<ini_document> parse_ini(std::string_view text, std::string_view source, diagnostics& diag);

// A missing file is an empty document, as for AWS tools; one that exists but cannot be read is
// errc::unreadable_file.
result<ini_document> load_ini_file(const std::filesystem::path& path, diagnostics& diag);

}  // namespace ferry::net
