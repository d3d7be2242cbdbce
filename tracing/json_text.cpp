#include "tracing/json_text.hpp"

#include <array>
#include <cctype>
#include <cmath>

namespace ferry::tracing {
namespace {

constexpr std::string_view redacted = "REDACTED";

bool needs_escape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

bool contains_ci(std::string_view haystack, std::string_view needle) {
  if (needle.size() > haystack.size()) return false;
  for (std::size_t i = 0; i + needle.size() <= haystack.size(); ++i) {
    std::size_t j = 0;
    while (j < needle.size() &&
           std::tolower(static_cast<unsigned char>(haystack[i + j])) == needle[j])
      ++j;
    if (j == needle.size()) return true;
  }
  return false;
}

// Query parameters of presigned URLs whose values grant access.
constexpr std::array<std::string_view, 2> secret_query_params = {"X-Amz-Signature=", "X-Amz-Security-Token="};

}  // namespace

void append_json_string(text_buffer& out, std::string_view s) {
  out.push_back('"');
  std::size_t run = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!needs_escape(c)) continue;
    out.append(s.data() + run, s.data() + i);
    run = i + 1;
    switch (c) {
      case '"': out.append(std::string_view("\\\"")); break;
      case '\\': out.append(std::string_view("\\\\")); break;
      case '\n': out.append(std::string_view("\\n")); break;
      case '\r': out.append(std::string_view("\\r")); break;
      case '\t': out.append(std::string_view("\\t")); break;
      default: fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
    }
  }
  out.append(s.data() + run, s.data() + s.size());
  out.push_back('"');
}

bool is_secret_key(std::string_view key) {
  static constexpr std::array<std::string_view, 8> words = {
      "secret", "password", "passwd", "token", "signature", "authorization", "credential", "private_key"};
  for (auto w : words)
    if (contains_ci(key, w)) return true;
  return false;
}

std::string redact_text(std::string_view text) {
  std::string out(text);
  for (auto param : secret_query_params) {
    std::size_t pos = 0;
    while ((pos = out.find(param, pos)) != std::string::npos) {
      const auto begin = pos + param.size();
      auto end = out.find_first_of("&# \"'\n", begin);
      if (end == std::string::npos) end = out.size();
      out.replace(begin, end - begin, redacted);
      pos = begin + redacted.size();
    }
  }
  return out;
}

namespace {

void append_string_value(text_buffer& out, std::string_view s) {
  // Presigned URLs are the one kind of secret that hides in ordinary text.
  if (s.find("X-Amz-") != std::string_view::npos) {
    append_json_string(out, redact_text(s));
    return;
  }
  append_json_string(out, s);
}

void append_double(text_buffer& out, double d) {
  if (!std::isfinite(d)) {
    out.append(std::string_view("null"));
    return;
  }
  fmt::format_to(std::back_inserter(out), "{}", d);
}

// What the two public forms share: `redact` for traces, not for the user's own output.
void append_value(text_buffer& out, const boost::json::value& v, bool redact) {
  switch (v.kind()) {
    case boost::json::kind::null: out.append(std::string_view("null")); break;
    case boost::json::kind::bool_: out.append(std::string_view(v.get_bool() ? "true" : "false")); break;
    case boost::json::kind::int64: fmt::format_to(std::back_inserter(out), "{}", v.get_int64()); break;
    case boost::json::kind::uint64: fmt::format_to(std::back_inserter(out), "{}", v.get_uint64()); break;
    case boost::json::kind::double_: append_double(out, v.get_double()); break;
    case boost::json::kind::string:
      if (redact)
        append_string_value(out, v.get_string());
      else
        append_json_string(out, v.get_string());
      break;
    case boost::json::kind::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& item : v.get_array()) {
        if (!first) out.push_back(',');
        first = false;
        append_value(out, item, redact);
      }
      out.push_back(']');
      break;
    }
    case boost::json::kind::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.get_object()) {
        if (!first) out.push_back(',');
        first = false;
        append_json_string(out, key);
        out.push_back(':');
        if (redact && is_secret_key(key))
          append_json_string(out, redacted);
        else
          append_value(out, item, redact);
      }
      out.push_back('}');
      break;
    }
  }
}

}  // namespace

void append_json_value(text_buffer& out, const boost::json::value& v) { append_value(out, v, true); }

void append_plain_json(text_buffer& out, const boost::json::value& v) { append_value(out, v, false); }

void append_field(text_buffer& out, const field& f) {
  out.push_back(',');
  append_json_string(out, f.key());
  out.push_back(':');
  if (is_secret_key(f.key())) {
    append_json_string(out, redacted);
    return;
  }
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>)
          out.append(std::string_view(v ? "true" : "false"));
        else if constexpr (std::is_same_v<T, double>)
          append_double(out, v);
        else if constexpr (std::is_same_v<T, std::string_view>)
          append_string_value(out, v);
        else if constexpr (std::is_same_v<T, const boost::json::value*>)
          append_json_value(out, *v);
        else
          fmt::format_to(std::back_inserter(out), "{}", v);
      },
      f.value());
}

}  // namespace ferry::tracing
