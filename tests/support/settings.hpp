#pragma once
// ferry's built-in configuration, loaded as the CLI loads it but with nothing from this machine:
// no config files, no FERRY_* variables, HOME pointing at `home`.
#include "config/settings.hpp"

#include <filesystem>

namespace ferry::test {

config::settings default_settings(const std::filesystem::path& home);

}  // namespace ferry::test
