#pragma once
// Appending JSON text to a buffer, fast and without a DOM: the sink's hot path. Secrets are filtered here,
// at the one place every field passes through, so no caller can forget to.
#include "tracing/field.hpp"

#include <fmt/format.h>

#include <string_view>

namespace ferry::tracing {

using text_buffer = fmt::memory_buffer;

void append_json_string(text_buffer& out, std::string_view s);

// True for keys that name secrets: secret keys, session tokens, signatures, passwords, credentials.
bool is_secret_key(std::string_view key);

// The text with the signature and session token of any presigned URL in it replaced by "REDACTED".
std::string redact_text(std::string_view text);

// `"key":value` (with a leading comma), the value redacted when the key names a secret.
void append_field(text_buffer& out, const field& f);

// A JSON value, with values under secret keys of nested objects redacted.
void append_json_value(text_buffer& out, const boost::json::value& v);

// A JSON value as it is, nothing redacted, for output meant for the user (a task's own stdout). Doubles
// are plain decimals (`0.205`), where boost::json::serialize writes `2.05E-1`.
void append_plain_json(text_buffer& out, const boost::json::value& v);

}  // namespace ferry::tracing
