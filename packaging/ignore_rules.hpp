#pragma once
// Which files of a workspace ferry leaves out, with git's precedence. Sans-io: a tree walker reads the
// ignore files and tells the rules as it enters and leaves directories.
//
// Whatever the patterns say, an entry named ".git" (directory or file, at any depth) is always out: git never
// lists one either. Then, highest priority first:
//   1. the deepest directory's .ferryignore, then its .gitignore, then the same for each parent up to the root;
//   2. the ignore files git reads from outside the root (outer_ignore_file, see git_repository.hpp): the
//      .gitignore of each directory above the root up to the repository's top level, nearest first, then
//      the repository's info/exclude, then the global core.excludesFile. This is git's own order, so with
//      no packaging.excludes and no defaults ferry packs exactly what `git ls-files --others
//      --exclude-standard` lists;
//   3. config packaging.excludes (matched as if written in a .gitignore at the root);
//   4. ferry's defaults (default_excludes()).
// ferry's own settings sit below everything git reads because they are general policy, while git's files
// speak of this project (or, for the global file, this user): so a "!" line in any of them can take back
// what packaging.excludes or a default leaves out (a whitelist's "!*/" takes back .venv/, as git would).
// Within one list the last matching line wins, and a "!" line re-includes. As in git, nothing under an
// excluded directory can be re-included: the walker does not enter it, and for a path inside one
// explain() names the pattern that excluded the outermost such directory.
#include "packaging/ignore_pattern.hpp"

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::packaging {

// Where the pattern that decided a path came from, for `ferry pack --explain PATH`.
struct explanation {
  enum class origin { file, config, builtin, always };
  origin from = origin::file;
  std::string file;      // for origin::file, relative to the root: "a/b/.gitignore"
  std::size_t line = 0;  // 1-based: the file's line, or the position in packaging.excludes or the defaults
  std::string pattern;   // as written, e.g. "!build/"
  bool negated = false;  // the path matched a "!" pattern, so it is included

  // "a/.gitignore:3: build/", "config packaging.excludes[2]: *.csv", "default: __pycache__/", "always: .git".
  std::string describe() const;
};

// "__pycache__/", "*.pyc", ".ipynb_checkpoints/", ".venv/": never worth shipping, and a workspace's
// own virtualenv travels as the interpreter's layers instead.
std::span<const std::string_view> default_excludes();

// An ignore file that applies to the walked root from outside it, with patterns relative to its own base
// directory (the repository's top level for info/exclude and the global file).
struct outer_ignore_file {
  std::string name;       // as explain() names it: "../.gitignore", "/src/proj/.git/info/exclude"
  std::string contents;
  std::string root_path;  // the walked root's path from the file's base directory: "" or "sub/ws"
};

// The directory at or above the walked root, below the repository's top level, that git's own ignore files
// exclude: git lists none of the files under it, so none of the workspace's. ferry packs the workspace all
// the same (the user asked to run it) and says so: a warning at pack time, and a note in --explain.
struct excluded_ancestor {
  std::size_t levels_up = 0;  // 0: the root itself, 1: its parent, ...
  explanation rule;
};

struct ignore_options {
  bool defaults = true;               // apply default_excludes()
  std::vector<std::string> excludes;  // config packaging.excludes, gitignore syntax
};

class ignore_rules {
 public:
  // `outer` in priority order, highest first.
  explicit ignore_rules(const ignore_options& options = {}, std::span<const outer_ignore_file> outer = {});

  // Enters `relative_dir` ("" for the root, then "a", "a/b", ...: each a child of the directory entered
  // last) with the contents of its .gitignore and .ferryignore ("" when absent). Entering the wrong
  // directory is a bug in the caller and throws std::logic_error. `through_symlink`: the directory is a
  // symlink's target, which the rules see as the link, not as a directory (a "data/" line does not match
  // a link named data, as in git).
  void push_directory(std::string_view relative_dir, std::string_view gitignore, std::string_view ferryignore,
                      bool through_symlink = false);
  void pop_directory();
  std::size_t depth() const { return levels_.size(); }

  // The outermost directory on the way from the repository's top level down to the root (the root
  // included) that the outer ignore files exclude, as git decides it: nearest file first, the last matching
  // line of a file wins, and git goes no further down once a directory is excluded.
  std::optional<excluded_ancestor> ancestor_excluded() const;

  // `relative_path` must lie directly in the directory entered last.
  bool ignored(std::string_view relative_path, bool is_dir) const;
  // The pattern that decides the path, or nullopt when none matches (the path is included).
  std::optional<explanation> explain(std::string_view relative_path, bool is_dir) const;

 private:
  struct rule {
    ignore_pattern pattern;
    explanation source;  // `negated` mirrors the pattern's
  };
  struct level {
    std::string dir;                          // "" for the root
    std::vector<rule> rules;                  // .gitignore then .ferryignore: later lines win
    std::optional<explanation> excluded_by;   // set when this directory (or one above it) is excluded
  };

  // The explanation that decides the path (stored here), or nullptr when no pattern matches.
  const explanation* decide(std::string_view relative_path, bool is_dir) const;
  void check_parent(std::string_view relative_path, const char* what) const;

  struct outer_list {
    std::string prefix;  // "sub/ws/": put before a root-relative path to match the file's patterns
    std::vector<rule> rules;
  };

  std::vector<outer_list> outer_;  // highest priority first
  std::vector<rule> root_rules_;  // defaults then config excludes, below every file
  explanation always_git_;
  std::vector<level> levels_;
};

}  // namespace ferry::packaging
