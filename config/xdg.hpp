#pragma once
// XDG base directories (cache, state, config) for ferry, from an injected environment.
#include "config/settings.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::config {

using env_lookup = std::function<std::optional<std::string>(std::string_view name)>;

// The process environment.
env_lookup process_env();

paths xdg_paths(const env_lookup& env);

}  // namespace ferry::config
