#pragma once
// Which files of a workspace ferry leaves out, with git's precedence. Sans-io: a tree walker reads the
// ignore files and tells the rules as it enters and leaves directories.
//
// Highest priority first:
//   1. the deepest directory's .ferryignore, then its .gitignore, then the same for each parent up to the root;
//   2. config packaging.excludes (matched as if written in a .gitignore at the root);
//   3. ferry's defaults (default_excludes()).
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
  enum class origin { file, config, builtin };
  origin from = origin::file;
  std::string file;      // for origin::file, relative to the root: "a/b/.gitignore"
  std::size_t line = 0;  // 1-based: the file's line, or the position in packaging.excludes or the defaults
  std::string pattern;   // as written, e.g. "!build/"
  bool negated = false;  // the path matched a "!" pattern, so it is included

  // "a/.gitignore:3: build/", "config packaging.excludes[2]: *.csv", "default: __pycache__/".
  std::string describe() const;
};

// ".git", "__pycache__/", "*.pyc", ".ipynb_checkpoints/", ".venv/": never worth shipping, and a workspace's
// own virtualenv travels as the interpreter's layers instead.
std::span<const std::string_view> default_excludes();

struct ignore_options {
  bool defaults = true;               // apply default_excludes()
  std::vector<std::string> excludes;  // config packaging.excludes, gitignore syntax
};

class ignore_rules {
 public:
  explicit ignore_rules(const ignore_options& options = {});

  // Enters `relative_dir` ("" for the root, then "a", "a/b", ...: each a child of the directory entered
  // last) with the contents of its .gitignore and .ferryignore ("" when absent). Entering the wrong
  // directory is a bug in the caller and throws std::logic_error.
  void push_directory(std::string_view relative_dir, std::string_view gitignore, std::string_view ferryignore);
  void pop_directory();
  std::size_t depth() const { return levels_.size(); }

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

  std::vector<rule> root_rules_;  // defaults then config excludes, below every file
  std::vector<level> levels_;
};

}  // namespace ferry::packaging
