#include "net/aws_profile.hpp"

#include "net/error.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace ferry::net {
namespace {

std::optional<std::string_view> lookup(const ini_section& section, std::string_view key) {
  const auto it = section.find(key);
  if (it == section.end() || it->second.empty()) return std::nullopt;
  return std::string_view(it->second);
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

// "profile  NAME" -> "NAME"; anything else -> nullopt.
std::optional<std::string_view> profile_section_name(std::string_view section) {
  constexpr std::string_view prefix = "profile";
  if (!section.starts_with(prefix) || section.size() == prefix.size()) return std::nullopt;
  section.remove_prefix(prefix.size());
  if (!is_space(section.front())) return std::nullopt;
  while (!section.empty() && is_space(section.front())) section.remove_prefix(1);
  return section;
}

// The config file names profiles "[profile NAME]", except that the default may also be "[default]".
std::optional<ini_section> config_section(const ini_document& config_file, std::string_view name) {
  std::optional<ini_section> found;
  for (const auto& [section, values] : config_file.sections) {
    const bool match = profile_section_name(section) == name || (name == "default" && section == "default");
    if (!match) continue;
    if (!found) found.emplace();
    for (const auto& [key, value] : values) (*found)[key] = value;
  }
  return found;
}

std::filesystem::path shared_file(const environment& env, std::string_view variable, std::string_view default_name) {
  const auto home = set_variable(env, "HOME");
  if (auto chosen = set_variable(env, variable)) {
    if (home && (*chosen == "~" || chosen->starts_with("~/"))) return *home + chosen->substr(1);
    return *chosen;
  }
  if (!home) return {};
  return std::filesystem::path(*home) / ".aws" / default_name;
}

result<ini_document> load_if_named(const std::filesystem::path& path, diagnostics& diag) {
  if (path.empty()) return ini_document{};
  return load_ini_file(path, diag);
}

}  // namespace

std::optional<std::string> set_variable(const environment& env, std::string_view name) {
  auto value = env(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

environment process_environment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  };
}

environment map_environment(std::map<std::string, std::string, std::less<>> variables) {
  return [variables = std::move(variables)](std::string_view name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

std::optional<std::string_view> aws_profile::credentials_setting(std::string_view key) const {
  return lookup(credentials, key);
}

std::optional<std::string_view> aws_profile::config_setting(std::string_view key) const { return lookup(config, key); }

result<aws_profile> select_profile(std::string_view name, bool chosen_explicitly, const ini_document& credentials_file,
                                   ini_document config_file, diagnostics& diag) {
  aws_profile profile;
  profile.name = std::string(name);
  const auto* in_credentials = credentials_file.find(name);
  auto in_config = config_section(config_file, name);
  if (chosen_explicitly && !in_credentials && !in_config) {
    diag.set(fmt::format("AWS profile '{}' is in neither the credentials nor the config file", name));
    return make_error_code(errc::profile_not_found);
  }
  if (in_credentials) profile.credentials = *in_credentials;
  if (in_config) profile.config = std::move(*in_config);
  profile.config_file = std::move(config_file);
  return profile;
}

result<aws_profile> load_aws_profile(const environment& env, diagnostics& diag) {
  auto name = set_variable(env, "AWS_PROFILE");
  if (!name) name = set_variable(env, "AWS_DEFAULT_PROFILE");
  const bool chosen_explicitly = name.has_value();

  const auto credentials_path = shared_file(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
  const auto config_path = shared_file(env, "AWS_CONFIG_FILE", "config");
  auto credentials_file = load_if_named(credentials_path, diag);
  if (!credentials_file) return credentials_file.error();
  auto config_file = load_if_named(config_path, diag);
  if (!config_file) return config_file.error();

  auto profile =
      select_profile(name.value_or("default"), chosen_explicitly, *credentials_file, std::move(*config_file), diag);
  if (!profile) {
    diag.set(fmt::format("{} ({}, {})", diag.message, credentials_path.string(), config_path.string()));
    return profile.error();
  }
  profile->credentials_path = credentials_path;
  profile->config_path = config_path;
  return profile;
}

std::string resolve_region(const environment& env, const aws_profile& profile) {
  if (auto region = set_variable(env, "AWS_REGION")) return *region;
  if (auto region = set_variable(env, "AWS_DEFAULT_REGION")) return *region;
  if (auto region = profile.config_setting("region")) return std::string(*region);
  return "us-east-1";
}

}  // namespace ferry::net
