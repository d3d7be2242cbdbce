#pragma once
// The AWS settings a process inherits: environment variables and the shared files ~/.aws/credentials
// and ~/.aws/config, read the way the AWS CLI and SDKs read them. The environment is a function, so
// tests and callers can hand in any set of variables instead of the process's own.
#include "net/ini_file.hpp"
#include "tracing/diagnostics.hpp"

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::net {

// Returns a variable's value, or nullopt when it is unset. Set-but-empty counts as unset everywhere
// in net/, so `AWS_PROFILE= ferry ...` behaves like no AWS_PROFILE at all.
using environment = std::function<std::optional<std::string>(std::string_view name)>;

environment process_environment();
// The variable's value, or nullopt when it is unset or empty (see above).
std::optional<std::string> set_variable(const environment& env, std::string_view name);
environment map_environment(std::map<std::string, std::string, std::less<>> variables);

struct aws_profile {
  std::string name = "default";
  std::filesystem::path credentials_path;  // empty when neither HOME nor AWS_SHARED_CREDENTIALS_FILE is set
  std::filesystem::path config_path;       // empty when neither HOME nor AWS_CONFIG_FILE is set
  ini_section credentials;                 // [name] from the credentials file
  ini_section config;                      // [profile name] ([default] for the default) from the config file
  ini_document config_file;                // all of it, for sections a profile refers to ([services x])

  std::optional<std::string_view> credentials_setting(std::string_view key) const;
  std::optional<std::string_view> config_setting(std::string_view key) const;
};

// Picks `name` out of parsed files. A profile chosen explicitly must exist in one of them
// (errc::profile_not_found); the default profile may be absent.
result<aws_profile> select_profile(std::string_view name, bool chosen_explicitly, const ini_document& credentials_file,
                                   ini_document config_file, diagnostics& diag);

// AWS_PROFILE (then AWS_DEFAULT_PROFILE, then "default") out of AWS_SHARED_CREDENTIALS_FILE and
// AWS_CONFIG_FILE, which default to ~/.aws/credentials and ~/.aws/config.
result<aws_profile> load_aws_profile(const environment& env, diagnostics& diag);

// AWS_REGION, then AWS_DEFAULT_REGION, then the profile's region, then us-east-1.
std::string resolve_region(const environment& env, const aws_profile& profile);

}  // namespace ferry::net
