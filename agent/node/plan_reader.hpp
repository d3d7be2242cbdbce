#pragma once
// Reading the node program's JSON plans (plan.hpp, stage_plan.hpp) with the field named in every error:
// a plan is ferry's own, so a fault in one is a bug or a mismatched build, and the message must say which.
#include "agent/node/error.hpp"
#include "agent/node/plan.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::agent::node::plan_reading {

namespace json = boost::json;

inline bool is_hex(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isxdigit(c); });
}

inline bool one_line(std::string_view text) {
  return text.find_first_of(std::string_view("\0\n\r", 3)) == std::string_view::npos;
}

inline error_code bad(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::bad_plan);
}

struct reader {
  const json::object& o;
  std::string_view where;
  diagnostics& diag;
  error_code ec;

  const json::value* get(std::string_view key) {
    const auto* v = o.if_contains(key);
    if (!v && !ec) ec = bad(diag, fmt::format("the plan's {} lacks '{}'", where, key));
    return v;
  }
  std::string text(std::string_view key) {
    const auto* v = get(key);
    if (!v) return {};
    if (!v->is_string()) {
      if (!ec) ec = bad(diag, fmt::format("the plan's {}.{} is not a string", where, key));
      return {};
    }
    return std::string(v->get_string());
  }
  std::uint64_t number(std::string_view key) {
    const auto* v = get(key);
    if (!v) return 0;
    if (v->is_uint64()) return v->get_uint64();
    if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
    if (!ec) ec = bad(diag, fmt::format("the plan's {}.{} is not a count", where, key));
    return 0;
  }
  std::uint64_t number_or(std::string_view key, std::uint64_t fallback) {
    return o.contains(key) ? number(key) : fallback;
  }
  const json::array* array(std::string_view key) {
    const auto* v = get(key);
    if (v && !v->is_array()) {
      if (!ec) ec = bad(diag, fmt::format("the plan's {}.{} is not a list", where, key));
      return nullptr;
    }
    return v ? &v->get_array() : nullptr;
  }
};

inline const json::object* object_of(const json::value& v) { return v.is_object() ? &v.get_object() : nullptr; }

}  // namespace ferry::agent::node::plan_reading

namespace ferry::agent::node {

// A plan's "limits" object, written and read (absent or partial: the defaults; deadlines clamped to
// between a millisecond and a day, counts to sane bounds).
boost::json::object limits_json(const node_limits& limits);
result<node_limits> read_limits(const boost::json::value* limits, diagnostics& diag);

}  // namespace ferry::agent::node
