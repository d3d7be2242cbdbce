#include "packaging/git_repository.hpp"

#include "packaging/git_config.hpp"
#include "packaging/ignore_file_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>

namespace ferry::packaging {
namespace {

namespace fs = std::filesystem;

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

bool is_dir(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string read_followed(const fs::path& p) { return read_ignore_file(AT_FDCWD, p.c_str(), true).text; }

// `relative` from `base` unless absolute, without "..", "." or a trailing '/'.
fs::path resolve(const fs::path& base, const fs::path& relative) {
  auto out = (relative.is_absolute() ? relative : base / relative).lexically_normal();
  if (!out.has_filename() && out.has_parent_path()) out = out.parent_path();
  return out;
}

// git's is_git_directory, enough of it: HEAD, objects/ and refs/ (the two in the common directory).
bool looks_like_git_dir(const fs::path& dir, const fs::path& common) {
  return is_file(dir / "HEAD") && is_dir(common / "objects") && is_dir(common / "refs");
}

fs::path common_dir_of(const fs::path& git_dir) {
  auto text = read_followed(git_dir / "commondir");
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) return git_dir;
  return resolve(git_dir, text);
}

// A ".git" file: "gitdir: PATH", PATH relative to the file's directory.
std::optional<fs::path> follow_git_file(const fs::path& file) {
  auto text = read_followed(file);
  constexpr std::string_view prefix = "gitdir: ";
  if (!text.starts_with(prefix)) return std::nullopt;
  text.erase(0, prefix.size());
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return resolve(file.parent_path(), text);
}

// The config files git reads, lowest priority first.
std::vector<fs::path> config_files(const git_repository& repo, const git_environment& env) {
  std::vector<fs::path> out;
  if (!env.no_system) out.emplace_back(env.config_system.empty() ? "/etc/gitconfig" : env.config_system);
  if (!env.config_global.empty()) {
    out.emplace_back(env.config_global);
  } else {
    if (!env.xdg_config_home.empty()) {
      out.push_back(fs::path(env.xdg_config_home) / "git" / "config");
    } else if (!env.home.empty()) {
      out.push_back(fs::path(env.home) / ".config" / "git" / "config");
    }
    if (!env.home.empty()) out.push_back(fs::path(env.home) / ".gitconfig");
  }
  out.push_back(repo.common_dir / "config");
  return out;
}

// Reads one config file and the files it includes, keeping the last core.excludesFile.
void read_config(const fs::path& file, const git_environment& env, int depth, std::optional<std::string>& found) {
  if (depth > 10) return;  // git stops an include loop with an error; ferry just stops
  for (const auto& entry : parse_git_config(read_followed(file))) {
    if (!entry.value) continue;
    if (entry.name == "core.excludesfile") {
      found = expand_config_path(*entry.value, env.home);
    } else if (entry.name == "include.path") {
      const auto included = expand_config_path(*entry.value, env.home);
      if (!included) continue;
      const fs::path p(*included);
      read_config(p.is_absolute() ? p : file.parent_path() / p, env, depth + 1, found);
    }
  }
}

// core.excludesFile as git names it, or git's default when it is not set.
std::optional<std::string> global_excludes_file(const git_repository& repo, const git_environment& env) {
  std::optional<std::string> found;
  for (const auto& file : config_files(repo, env)) read_config(file, env, 0, found);
  if (found) {
    // A relative path is relative to where git runs: the top level of the working tree.
    if (!found->empty() && !fs::path(*found).is_absolute()) return (repo.top / *found).string();
    return found;
  }
  if (!env.xdg_config_home.empty()) return env.xdg_config_home + "/git/ignore";
  if (!env.home.empty()) return env.home + "/.config/git/ignore";
  return std::nullopt;
}

}  // namespace

git_environment git_environment::from_process() {
  git_environment env;
  env.home = env_or_empty("HOME");
  env.xdg_config_home = env_or_empty("XDG_CONFIG_HOME");
  env.config_system = env_or_empty("GIT_CONFIG_SYSTEM");
  env.config_global = env_or_empty("GIT_CONFIG_GLOBAL");
  // git_env_bool: any value but a false one ("0", "false", "no", "off", "") counts.
  const auto no_system = env_or_empty("GIT_CONFIG_NOSYSTEM");
  env.no_system = !no_system.empty() && no_system != "0" && no_system != "false" && no_system != "no" &&
                  no_system != "off";
  return env;
}

std::optional<git_repository> find_git_repository(const fs::path& dir) {
  for (fs::path at = dir;; at = at.parent_path()) {
    const auto dot_git = at / ".git";
    struct stat st {};
    if (::stat(dot_git.c_str(), &st) == 0) {
      std::optional<fs::path> git_dir;
      if (S_ISDIR(st.st_mode)) git_dir = dot_git;
      if (S_ISREG(st.st_mode)) git_dir = follow_git_file(dot_git);
      if (git_dir) {
        const auto common = common_dir_of(*git_dir);
        if (looks_like_git_dir(*git_dir, common)) return git_repository{at, *git_dir, common};
      }
    }
    if (at == at.root_path() || at.empty()) return std::nullopt;
  }
}

bool is_repository_dir(const fs::path& dir) {
  const auto dot_git = dir / ".git";
  struct stat st {};
  if (::stat(dot_git.c_str(), &st) != 0) return false;
  std::optional<fs::path> git_dir;
  if (S_ISDIR(st.st_mode)) git_dir = dot_git;
  if (S_ISREG(st.st_mode)) git_dir = follow_git_file(dot_git);
  return git_dir && looks_like_git_dir(*git_dir, common_dir_of(*git_dir));
}

std::vector<std::string> submodule_paths(const git_repository& repo) {
  std::vector<std::string> out;
  for (const auto& entry : parse_git_config(read_followed(repo.top / ".gitmodules"))) {
    if (!entry.value || !entry.name.starts_with("submodule.") || !entry.name.ends_with(".path")) continue;
    auto path = fs::path(*entry.value).lexically_normal().generic_string();
    while (path.ends_with('/')) path.pop_back();
    if (!path.empty() && path != "." && !path.starts_with("../")) out.push_back(std::move(path));
  }
  return out;
}

std::vector<outer_ignore_file> outer_ignore_files(const fs::path& root, const git_environment& env) {
  std::error_code ec;
  const auto real = fs::canonical(root, ec);
  if (ec) return {};
  const auto repo = find_git_repository(real);
  if (!repo) return {};
  const std::string from_top = real.lexically_relative(repo->top).generic_string();
  const std::string root_path = from_top == "." ? "" : from_top;

  std::vector<outer_ignore_file> out;
  // The .gitignore of each directory above the root, nearest first, named from the root ("../.gitignore").
  std::string up;
  for (auto at = real; at != repo->top;) {
    at = at.parent_path();
    up += "../";
    const auto below = real.lexically_relative(at).generic_string();
    auto contents = read_ignore_file(AT_FDCWD, (at / ".gitignore").c_str(), false);
    if (!contents.text.empty()) out.push_back({up + ".gitignore", std::move(contents.text), below});
  }
  const auto info_exclude = repo->common_dir / "info" / "exclude";
  if (auto text = read_followed(info_exclude); !text.empty()) {
    out.push_back({info_exclude.string(), std::move(text), root_path});
  }
  if (const auto global = global_excludes_file(*repo, env)) {
    if (auto text = read_followed(*global); !text.empty()) out.push_back({*global, std::move(text), root_path});
  }
  return out;
}

}  // namespace ferry::packaging
