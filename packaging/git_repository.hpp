#pragma once
// The ignore files git applies to a directory from outside it: the .gitignore files of the directories
// between the repository's top level and it, the repository's info/exclude, and the global excludes file
// (core.excludesFile, by default $XDG_CONFIG_HOME/git/ignore or ~/.config/git/ignore). Found without
// running git, as git finds them:
// - the repository is the nearest enclosing directory with a ".git" directory, or a ".git" file saying
//   "gitdir: PATH" (linked worktrees, submodules); info/exclude and the shared config live in its common
//   directory (a linked worktree's "commondir" file points there);
// - core.excludesFile is the last value in /etc/gitconfig (unless GIT_CONFIG_NOSYSTEM; GIT_CONFIG_SYSTEM
//   names another file), $XDG_CONFIG_HOME/git/config (or ~/.config/git/config), ~/.gitconfig
//   (GIT_CONFIG_GLOBAL replaces both), then the repository's config, following include.path.
//   Not read: includeIf, per-worktree config, GIT_CONFIG_COUNT and `git -c`, GIT_DIR.
// - a .gitignore that is a symlink is not read, as git does not; info/exclude and the global file may be.
#include "packaging/ignore_rules.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ferry::packaging {

// The environment variables git consults to find its config and ignore files.
struct git_environment {
  std::string home;
  std::string xdg_config_home;
  std::string config_system;  // GIT_CONFIG_SYSTEM
  std::string config_global;  // GIT_CONFIG_GLOBAL
  bool no_system = false;     // GIT_CONFIG_NOSYSTEM

  static git_environment from_process();
};

struct git_repository {
  std::filesystem::path top;         // the working tree's top level
  std::filesystem::path git_dir;     // ".git", or where a ".git" file points
  std::filesystem::path common_dir;  // git_dir, or the main repository's for a linked worktree
};

// The repository whose working tree holds `dir` (a real path), if any.
std::optional<git_repository> find_git_repository(const std::filesystem::path& dir);

// Whether `dir` holds a repository of its own: a ".git" directory or valid "gitdir:" file that git would
// take for one. git does not descend into such a directory below the top level: `ls-files --others`
// lists it as one entry.
bool is_repository_dir(const std::filesystem::path& dir);

// The paths of the repository's registered submodules (submodule.<name>.path in the top level's
// .gitmodules), from the top level, without a trailing '/'.
std::vector<std::string> submodule_paths(const git_repository& repo);

// The ignore files above `root` in git's order, highest priority first; none outside a repository.
std::vector<outer_ignore_file> outer_ignore_files(const std::filesystem::path& root, const git_environment& env);

}  // namespace ferry::packaging
