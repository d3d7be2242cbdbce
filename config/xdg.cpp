#include "config/xdg.hpp"

#include <cstdlib>
#include <pwd.h>
#include <unistd.h>

namespace ferry::config {
namespace {

std::filesystem::path home(const env_lookup& env) {
  if (auto h = env("HOME"); h && !h->empty()) return *h;
  if (const auto* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) return pw->pw_dir;
  return "/";
}

// $VAR when it is an absolute path (the spec says relative ones are ignored), else HOME/fallback.
std::filesystem::path base(const env_lookup& env, std::string_view var, std::string_view fallback) {
  if (auto v = env(var); v && !v->empty() && v->front() == '/') return *v;
  return home(env) / fallback;
}

}  // namespace

env_lookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const std::string key(name);
    if (const char* v = std::getenv(key.c_str())) return std::string(v);
    return std::nullopt;
  };
}

paths xdg_paths(const env_lookup& env) {
  return {base(env, "XDG_CACHE_HOME", ".cache") / "ferry", base(env, "XDG_STATE_HOME", ".local/state") / "ferry",
          base(env, "XDG_CONFIG_HOME", ".config") / "ferry"};
}

}  // namespace ferry::config
