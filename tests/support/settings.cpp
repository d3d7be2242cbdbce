#include "support/settings.hpp"

#include "config/loader.hpp"

#include <stdexcept>

namespace ferry::test {

config::settings default_settings(const std::filesystem::path& home) {
  config::load_options o;
  o.working_dir = home / "project";
  o.env = [home = home.string()](std::string_view name) -> std::optional<std::string> {
    if (name == "HOME") return home;
    return std::nullopt;
  };
  diagnostics diag;
  auto loaded = config::load(o, diag);
  if (!loaded) throw std::runtime_error(diag.message);
  return loaded->values;
}

}  // namespace ferry::test
