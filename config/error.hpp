#pragma once
// Configuration failures. Every one of them is a usage error for the CLI (exit code 2).
#include <boost/system/error_code.hpp>

#include <type_traits>

namespace ferry::config {

enum class errc {
  unreadable_file = 1,  // a config file exists (or was named) but cannot be read
  malformed,            // not valid TOML
  unknown_key,          // a key ferry does not know
  wrong_type,           // a value of the wrong TOML type
  bad_value,            // the right type, but out of range or unparseable ("10 parsecs")
  too_large,            // a config file larger than max_config_file_size, refused before it is parsed
};

const boost::system::error_category& category();

inline boost::system::error_code make_error_code(errc e) { return {static_cast<int>(e), category()}; }

}  // namespace ferry::config

template <>
struct boost::system::is_error_code_enum<ferry::config::errc> : std::true_type {};
