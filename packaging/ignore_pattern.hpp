#pragma once
// One line of a .gitignore (or .ferryignore, or a packaging.excludes entry), parsed and matched exactly as
// git does: gitignore(5) for the syntax, and git's own quirks (dir.c, wildmatch.c) where the manual is silent,
// because users check their ignore files with `git status` and expect ferry to agree.
// Paths and patterns are byte strings: file names need not be UTF-8.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::packaging {

// git's wildmatch. With `pathname` set, `*`, `?` and classes never match '/', and a `**` standing alone
// between slashes (or at either end) matches any number of directories; without it, every wildcard matches
// '/' too. A malformed pattern (an unterminated `[`, an unknown `[:class:]`, a trailing `\`) never matches.
bool wildmatch(std::string_view pattern, std::string_view text, bool pathname);

class ignore_pattern {
 public:
  // The pattern on one line (without its '\n'), or nullopt for a comment, a blank line, or a line that can
  // never match anything ("!", "/").
  static std::optional<ignore_pattern> parse(std::string_view line);

  // `path` is relative to the directory that holds the pattern ("a/b.txt": no leading or trailing '/');
  // `is_dir` says whether it names a directory, for patterns that end in '/'.
  bool matches(std::string_view path, bool is_dir) const;

  // The line as git reports it in `git check-ignore -v`: trailing spaces trimmed, '!' and '/' kept.
  const std::string& text() const { return text_; }
  bool negated() const { return negated_; }
  bool directory_only() const { return directory_only_; }
  // True when the pattern has no '/' before its end, so it matches a name at any depth.
  bool any_depth() const { return any_depth_; }

 private:
  bool match_name(std::string_view name) const;
  bool match_path(std::string_view path) const;

  std::string text_;
  std::string glob_;                // text_ without the '!' and the trailing '/'
  std::size_t literal_prefix_ = 0;  // leading bytes of glob_ with no wildcard: git compares them verbatim
  bool negated_ = false;
  bool directory_only_ = false;
  bool any_depth_ = false;
};

struct numbered_pattern {
  ignore_pattern pattern;
  std::size_t line = 0;  // 1-based, counting comments and blank lines, as git numbers them
};

// Every pattern of one ignore file's contents, in file order.
std::vector<numbered_pattern> parse_ignore_file(std::string_view contents);

}  // namespace ferry::packaging
