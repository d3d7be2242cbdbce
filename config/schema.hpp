#pragma once
// The table of configuration keys: name, default, help, environment variable, and how to read the value
// into `settings` and show it again. A key not in this table is an error wherever it appears.
#include "config/settings.hpp"

#include <toml++/toml.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::config {

struct key_spec {
  std::string_view name;           // dotted, as in ferry.toml: "net.retry.max_attempts"
  std::string_view default_value;  // TOML text
  std::string_view help;
  std::string_view env;            // overrides the FERRY_<NAME> variable name when set
  bool is_string;                  // environment values are taken verbatim, not parsed as TOML
  // Reads `node` into the setting; on failure says why in `why` and returns the error kind.
  bool (*apply)(settings& s, const toml::node& node, std::string& why, bool& wrong_type);
  std::string (*show)(const settings& s);

  std::string env_name() const;
};

std::span<const key_spec> schema();
const key_spec* find_key(std::string_view name);
// The known keys a misspelt one may have meant, for "did you mean" hints: the closest name, else the keys
// of the same (or nearly the same) name in other sections (`agent.idle_timeout`: `nodes.idle_timeout` and
// `ssh.idle_timeout`); empty when none is close.
std::vector<std::string_view> closest_keys(std::string_view name);

}  // namespace ferry::config
