#pragma once
// A custom field of an eliot message: a key and a value borrowed for the duration of one call.
#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

namespace ferry::tracing {

class field {
 public:
  using value_type = std::variant<std::int64_t, std::uint64_t, double, bool, std::string_view,
                                  const boost::json::value*>;

  field(std::string_view key, std::string_view v) : key_(key), value_(v) {}
  field(std::string_view key, const char* v) : key_(key), value_(std::string_view(v)) {}
  field(std::string_view key, const std::string& v) : key_(key), value_(std::string_view(v)) {}
  field(std::string_view key, bool v) : key_(key), value_(v) {}
  field(std::string_view key, double v) : key_(key), value_(v) {}
  field(std::string_view key, const boost::json::value& v) : key_(key), value_(&v) {}
  template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  field(std::string_view key, T v)
      : key_(key), value_(std::is_signed_v<T> ? value_type(static_cast<std::int64_t>(v))
                                              : value_type(static_cast<std::uint64_t>(v))) {}

  std::string_view key() const { return key_; }
  const value_type& value() const { return value_; }

 private:
  std::string_view key_;
  value_type value_;
};

}  // namespace ferry::tracing
