#pragma once
// Loading the configuration from its sources, highest first: flags, FERRY_* environment variables,
// ./ferry.toml (or --config FILE), $XDG_CONFIG_HOME/ferry/config.toml, built-in defaults. Every value
// remembers where it came from, and every error names its file:line:column or its variable.
#include "config/s3_url.hpp"
#include "config/schema.hpp"
#include "config/xdg.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ferry::config {

// A configuration file larger than this is refused before it is parsed: a parsed TOML document takes many
// times its size in memory (50 MB of tables took 879 MB), and real configuration files are a few KiB. Not a
// key: the limit guards the reading of the keys themselves.
inline constexpr std::uint64_t max_config_file_size = 1u << 20;

// A value given on the command line, e.g. --provider ssh for nodes.provider.
struct flag_value {
  std::string key;
  std::string value;
  std::string flag;
};

struct load_options {
  std::optional<std::filesystem::path> config_file;  // --config: replaces ./ferry.toml and must exist
  std::filesystem::path working_dir = ".";           // where ./ferry.toml is looked for
  std::vector<flag_value> flags;
  env_lookup env = process_env();
};

// storage.url, parsed once as the configuration is loaded; every command reads it from here. A malformed URL
// does not fail the load: commands that need no storage (version, trace, config show, doctor's other checks)
// still run, and one that needs storage refuses it as the configuration error it is (exit code 2).
struct storage_location {
  std::optional<s3_url> url;  // none: storage.url is unset, or malformed (then `problem` says why)
  std::string why;            // what is wrong with a malformed storage.url
  std::string problem;        // the same with where the value came from: "FILE:LINE:COL: storage.url: WHY"

  bool unset() const { return !url && problem.empty(); }
  bool malformed() const { return !problem.empty(); }
  // errc::bad_value, with `problem` in `diag`: what a command that needs storage says of a malformed URL.
  error_code refuse(diagnostics& diag) const;
};

struct loaded_config {
  settings values;
  storage_location storage;
  std::map<std::string, std::string, std::less<>> origin;  // key -> "default", "file:line:col", "env X"...
  std::vector<std::string> files;                          // files read, lowest priority first
};

result<loaded_config> load(const load_options& options, diagnostics& diag);

// `ferry config show`: every key as TOML, with where its value came from.
std::string render(const loaded_config& config);

}  // namespace ferry::config
