#include "config/loader.hpp"

#include "config/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <unistd.h>

namespace ferry::config {
namespace {

std::string position(const toml::source_region& where) {
  return fmt::format("{}:{}:{}", where.path ? *where.path : std::string("<input>"), where.begin.line,
                     where.begin.column);
}

// Sets one key from a TOML node; `origin` is what `config show` will say about it.
error_code assign(loaded_config& out, const key_spec& key, const toml::node& node, const std::string& origin,
                  diagnostics& diag) {
  std::string why;
  bool wrong_type = false;
  if (!key.apply(out.values, node, why, wrong_type)) {
    diag.set(fmt::format("{}: {}: {}", origin, key.name, why));
    return make_error_code(wrong_type ? errc::wrong_type : errc::bad_value);
  }
  out.origin.insert_or_assign(std::string(key.name), origin);
  return {};
}

error_code unknown_key(const std::string& where, const std::string& name, diagnostics& diag) {
  const auto hints = closest_keys(name);
  diag.set(fmt::format("{}: unknown key '{}'{}", where, name,
                       hints.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", fmt::join(hints, "' or '"))));
  return make_error_code(errc::unknown_key);
}

error_code apply_table(loaded_config& out, const toml::table& table, const std::string& prefix, diagnostics& diag) {
  for (const auto& [k, node] : table) {
    const std::string name = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const auto* sub = node.as_table(); sub && !find_key(name)) {
      if (auto ec = apply_table(out, *sub, name, diag)) return ec;
      continue;
    }
    const auto* key = find_key(name);
    if (!key) return unknown_key(position(k.source()), name, diag);
    if (auto ec = assign(out, *key, node, position(node.source()), diag)) return ec;
  }
  return {};
}

// The whole file, or the reason it cannot be read (errno's text: missing, a directory, no permission) or
// `too_large` set when it holds more than max_config_file_size bytes (counted as read: a FIFO has no size).
std::optional<std::string> read_whole(const std::filesystem::path& path, std::string& why, bool& too_large) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  std::string text;
  char buf[16384];
  for (;;) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) why = std::strerror(errno);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_config_file_size) {
      too_large = true;
      break;
    }
  }
  ::close(fd);
  if (!why.empty() || too_large) return std::nullopt;
  return text;
}

error_code apply_file(loaded_config& out, const std::filesystem::path& path, bool must_exist, diagnostics& diag) {
  std::error_code fs_ec;
  if (!must_exist && !std::filesystem::exists(path, fs_ec)) return {};
  std::string why;
  bool too_large = false;
  const auto text = read_whole(path, why, too_large);
  if (too_large) {
    diag.set(fmt::format("{}: larger than {}, the most a configuration file may hold; it is not read",
                         path.string(), format_byte_size(byte_size{max_config_file_size})));
    return make_error_code(errc::too_large);
  }
  if (!text) {
    diag.set(fmt::format("{}:1:1: cannot read configuration file: {}", path.string(), why));
    return make_error_code(errc::unreadable_file);
  }
  toml::table table;
  try {
    table = toml::parse(*text, path.string());
  } catch (const toml::parse_error& e) {
    diag.set(fmt::format("{}: {}", position(e.source()), e.description()));
    return make_error_code(errc::malformed);
  }
  out.files.push_back(path.string());
  return apply_table(out, table, "", diag);
}

// A value given as text (environment, flag): verbatim for strings, else read as a TOML value so that
// numbers, booleans and arrays keep their types; unparseable text is offered as a string.
error_code apply_text(loaded_config& out, const key_spec& key, const std::string& text, const std::string& origin,
                      diagnostics& diag) {
  if (!key.is_string) {
    try {
      auto doc = toml::parse("v = " + text);
      if (const auto* node = doc.get("v")) return assign(out, key, *node, origin, diag);
    } catch (const toml::parse_error&) {
      // Not a TOML literal: "10s" or "8MiB" arrive here and are read as strings below.
    }
  }
  return assign(out, key, toml::value<std::string>(text), origin, diag);
}

error_code apply_defaults(loaded_config& out, diagnostics& diag) {
  for (const auto& key : schema()) {
    auto doc = toml::parse("v = " + std::string(key.default_value));
    if (auto ec = assign(out, key, *doc.get("v"), "default", diag)) return ec;
  }
  return {};
}

error_code apply_environment(loaded_config& out, const env_lookup& env, diagnostics& diag) {
  for (const auto& key : schema()) {
    const auto name = key.env_name();
    if (auto value = env(name))
      if (auto ec = apply_text(out, key, *value, "environment " + name, diag)) return ec;
  }
  return {};
}

error_code apply_flags(loaded_config& out, const std::vector<flag_value>& flags, diagnostics& diag) {
  for (const auto& f : flags) {
    const auto* key = find_key(f.key);
    if (!key) return unknown_key("flag " + f.flag, f.key, diag);
    if (auto ec = apply_text(out, *key, f.value, "flag " + f.flag, diag)) return ec;
  }
  return {};
}

// Read here once for every command; a malformed URL is kept as a problem rather than failing the load.
void read_storage_url(loaded_config& out) {
  const auto& text = out.values.storage.url;
  if (text.empty()) return;
  diagnostics why;
  auto url = parse_s3_url(text, why);
  if (url) {
    out.storage.url = std::move(*url);
    return;
  }
  const auto it = out.origin.find("storage.url");
  out.storage.why = why.message;
  out.storage.problem =
      fmt::format("{}: storage.url: {}", it == out.origin.end() ? std::string("?") : it->second, why.message);
}

}  // namespace

error_code storage_location::refuse(diagnostics& diag) const {
  diag.set(problem);
  return make_error_code(errc::bad_value);
}

result<loaded_config> load(const load_options& options, diagnostics& diag) {
  loaded_config out;
  out.values.dirs = xdg_paths(options.env);
  if (auto ec = apply_defaults(out, diag)) return ec;
  if (auto ec = apply_file(out, out.values.dirs.config / "config.toml", false, diag)) return ec;
  const bool named = options.config_file.has_value();
  const auto project = named ? *options.config_file : options.working_dir / "ferry.toml";
  if (auto ec = apply_file(out, project, named, diag)) return ec;
  if (auto ec = apply_environment(out, options.env, diag)) return ec;
  if (auto ec = apply_flags(out, options.flags, diag)) return ec;
  // ec2.user defaults to whatever ssh.user ended up as, wherever that came from.
  if (out.values.ec2.user.empty()) {
    out.values.ec2.user = out.values.ssh.user;
    out.origin.insert_or_assign("ec2.user", "ssh.user (" + out.origin["ssh.user"] + ")");
  }
  read_storage_url(out);
  return out;
}

std::string render(const loaded_config& config) {
  std::vector<std::string> lines;
  std::size_t width = 0;
  for (const auto& key : schema()) {
    lines.push_back(fmt::format("{} = {}", key.name, key.show(config.values)));
    width = std::max(width, lines.back().size());
  }
  std::string out = "# files read, lowest priority first: ";
  out += config.files.empty() ? std::string("none") : fmt::format("{}", fmt::join(config.files, ", "));
  out += '\n';
  std::size_t i = 0;
  for (const auto& key : schema()) {
    const auto it = config.origin.find(key.name);
    out += fmt::format("{:<{}}  # {}\n", lines[i++], width, it == config.origin.end() ? "?" : it->second);
  }
  const auto& d = config.values.dirs;
  out += fmt::format("# cache dir: {}\n# state dir: {}\n# config dir: {}\n", d.cache.string(), d.state.string(),
                     d.config.string());
  return out;
}

}  // namespace ferry::config
