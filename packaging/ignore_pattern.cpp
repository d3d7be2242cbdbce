#include "packaging/ignore_pattern.hpp"

#include <algorithm>

namespace ferry::packaging {
namespace {

// The glob matcher follows git's wildmatch.c step for step, abort codes included: they are not only a
// speed-up, they decide which '*' may swallow a '/', and any "cleaner" matcher drifts from git in corners.
enum class outcome { match, no_match, abort_all, abort_to_starstar };

bool is_glob_special(unsigned char c) { return c == '*' || c == '?' || c == '[' || c == '\\'; }

bool is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_print(unsigned char c) { return c >= 0x20 && c <= 0x7e; }

// git's ctype is ASCII-only whatever the locale, so bytes of a UTF-8 name are in no class.
// nullopt for a class name git does not know, which makes the whole pattern fail.
std::optional<bool> in_named_class(std::string_view name, unsigned char c) {
  if (name == "alnum") return is_alpha(c) || is_digit(c);
  if (name == "alpha") return is_alpha(c);
  if (name == "blank") return c == ' ' || c == '\t';
  if (name == "cntrl") return c < 0x20 || c == 0x7f;
  if (name == "digit") return is_digit(c);
  if (name == "graph") return is_print(c) && c != ' ';
  if (name == "lower") return c >= 'a' && c <= 'z';
  if (name == "print") return is_print(c);
  if (name == "punct") return is_print(c) && c != ' ' && !is_alpha(c) && !is_digit(c);
  if (name == "space") return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  if (name == "upper") return c >= 'A' && c <= 'Z';
  if (name == "xdigit") return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  return std::nullopt;
}

class matcher {
 public:
  // Both strings end at their first NUL, as the C strings git matches do.
  matcher(std::string_view pattern, std::string_view text, bool pathname)
      : pattern_(pattern.substr(0, pattern.find('\0'))), text_(text.substr(0, text.find('\0'))),
        pathname_(pathname) {}

  bool matches() const { return dowild(0, 0) == outcome::match; }

 private:
  unsigned char p(std::size_t i) const { return i < pattern_.size() ? pattern_[i] : 0; }
  unsigned char t(std::size_t i) const { return i < text_.size() ? text_[i] : 0; }

  outcome dowild(std::size_t pi, std::size_t ti) const {
    const std::size_t start = pi;  // a "**" counts as a component only at the start of this (sub)pattern
    for (; p(pi) != 0; ++ti, ++pi) {
      unsigned char p_ch = p(pi);
      const unsigned char t_ch = t(ti);
      if (t_ch == 0 && p_ch != '*') return outcome::abort_all;
      switch (p_ch) {
        case '\\':
          p_ch = p(++pi);  // a trailing '\' leaves p_ch 0, which no text byte equals
          [[fallthrough]];
        default:
          if (t_ch != p_ch) return outcome::no_match;
          continue;
        case '?':
          if (pathname_ && t_ch == '/') return outcome::no_match;
          continue;
        case '*':
          if (auto done = star(start, pi, ti)) return *done;
          continue;
        case '[':
          if (auto done = bracket(pi, t_ch)) return *done;
          continue;
      }
    }
    return t(ti) ? outcome::no_match : outcome::match;
  }

  // At a run of '*'. Returns the final outcome, or nullopt when a single '*' before a '/' has skipped to
  // the next '/' of the text and matching goes on from there.
  std::optional<outcome> star(std::size_t start, std::size_t& pi, std::size_t& ti) const {
    unsigned char t_ch = t(ti);
    bool match_slash = !pathname_;
    if (p(++pi) == '*') {
      const bool after_boundary = pi - 1 == start || p(pi - 2) == '/';
      while (p(++pi) == '*') {
      }
      const bool before_boundary = p(pi) == 0 || p(pi) == '/' || (p(pi) == '\\' && p(pi + 1) == '/');
      if (pathname_ && after_boundary && before_boundary) {
        // "a/**/b" also matches "a/b": try the "**/" as matching nothing first.
        if (p(pi) == '/' && dowild(pi + 1, ti) == outcome::match) return outcome::match;
        match_slash = true;
      }
    }
    if (p(pi) == 0) {
      if (!match_slash && text_.find('/', ti) != std::string_view::npos) return outcome::no_match;
      return outcome::match;
    }
    if (!match_slash && p(pi) == '/') {
      const auto slash = text_.find('/', ti);
      if (slash == std::string_view::npos) return outcome::no_match;
      ti = slash;
      return std::nullopt;
    }
    for (; t_ch != 0; t_ch = t(++ti)) {
      if (!is_glob_special(p(pi))) {
        // Skip straight to the next occurrence of the literal that follows the star.
        const unsigned char p_ch = p(pi);
        while ((t_ch = t(ti)) != 0 && (match_slash || t_ch != '/') && t_ch != p_ch) ++ti;
        if (t_ch != p_ch) return outcome::no_match;
      }
      const outcome rest = dowild(pi, ti);
      if (rest != outcome::no_match) {
        if (!match_slash || rest != outcome::abort_to_starstar) return rest;
      } else if (!match_slash && t_ch == '/') {
        return outcome::abort_to_starstar;
      }
    }
    return outcome::abort_all;
  }

  // At a '['. Returns the final outcome, or nullopt when t_ch is in the class and matching goes on.
  std::optional<outcome> bracket(std::size_t& pi, unsigned char t_ch) const {
    unsigned char p_ch = p(++pi);
    if (p_ch == '^') p_ch = '!';
    const bool negated = p_ch == '!';
    if (negated) p_ch = p(++pi);
    unsigned char prev_ch = 0;
    bool matched = false;
    // The first member is taken before looking for ']', so "[]a]" holds ']' and 'a'.
    do {
      if (p_ch == 0) return outcome::abort_all;
      if (p_ch == '\\') {
        p_ch = p(++pi);
        if (p_ch == 0) return outcome::abort_all;
        if (t_ch == p_ch) matched = true;
      } else if (p_ch == '-' && prev_ch && p(pi + 1) && p(pi + 1) != ']') {
        p_ch = p(++pi);
        if (p_ch == '\\') {
          p_ch = p(++pi);
          if (p_ch == 0) return outcome::abort_all;
        }
        if (t_ch <= p_ch && t_ch >= prev_ch) matched = true;
        p_ch = 0;  // a range cannot start another range
      } else if (p_ch == '[' && p(pi + 1) == ':') {
        const std::size_t name_start = pi += 2;
        while ((p_ch = p(pi)) != 0 && p_ch != ']') ++pi;
        if (p_ch == 0) return outcome::abort_all;
        if (pi == name_start || p(pi - 1) != ':') {
          // No ":]": the '[' is an ordinary member.
          pi = name_start - 2;
          p_ch = '[';
          if (t_ch == p_ch) matched = true;
          continue;
        }
        const auto member = in_named_class(pattern_.substr(name_start, pi - name_start - 1), t_ch);
        if (!member) return outcome::abort_all;
        if (*member) matched = true;
        p_ch = 0;
      } else if (t_ch == p_ch) {
        matched = true;
      }
    } while (prev_ch = p_ch, (p_ch = p(++pi)) != ']');
    if (matched == negated || (pathname_ && t_ch == '/')) return outcome::no_match;
    return std::nullopt;
  }

  std::string_view pattern_;
  std::string_view text_;
  bool pathname_;
};

std::size_t literal_length(std::string_view s) {
  const auto it = std::find_if(s.begin(), s.end(), [](char c) { return is_glob_special(c); });
  return static_cast<std::size_t>(it - s.begin());
}

// Unescaped trailing spaces go; "\ " keeps the space, and a line ending in a lone '\' is left whole.
std::string_view trim_trailing_spaces(std::string_view line) {
  std::optional<std::size_t> first_trailing_space;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == ' ') {
      if (!first_trailing_space) first_trailing_space = i;
      continue;
    }
    if (line[i] == '\\' && ++i == line.size()) return line;
    first_trailing_space.reset();
  }
  return first_trailing_space ? line.substr(0, *first_trailing_space) : line;
}

}  // namespace

bool wildmatch(std::string_view pattern, std::string_view text, bool pathname) {
  return matcher(pattern, text, pathname).matches();
}

std::optional<ignore_pattern> ignore_pattern::parse(std::string_view line) {
  if (line.empty() || line.front() == '#') return std::nullopt;
  if (line.back() == '\r') line.remove_suffix(1);
  line = trim_trailing_spaces(line.substr(0, line.find('\0')));

  ignore_pattern out;
  out.text_ = line;
  std::string_view body = line;
  if (!body.empty() && body.front() == '!') {
    out.negated_ = true;
    body.remove_prefix(1);
  }
  // git measures the literal prefix before dropping the trailing '/', then caps it.
  const std::size_t literal = literal_length(body);
  if (!body.empty() && body.back() == '/') {
    out.directory_only_ = true;
    body.remove_suffix(1);
  }
  if (body.empty()) return std::nullopt;
  out.glob_ = body;
  out.literal_prefix_ = std::min(literal, body.size());
  out.any_depth_ = body.find('/') == std::string_view::npos;
  return out;
}

bool ignore_pattern::matches(std::string_view path, bool is_dir) const {
  if (directory_only_ && !is_dir) return false;
  if (any_depth_) {
    const auto slash = path.rfind('/');
    return match_name(slash == std::string_view::npos ? path : path.substr(slash + 1));
  }
  return match_path(path);
}

bool ignore_pattern::match_name(std::string_view name) const {
  if (literal_prefix_ == glob_.size()) return name == glob_;
  return wildmatch(glob_, name, false);
}

// git's match_pathname: a leading '/' only anchors (every such pattern is anchored anyway), the literal
// prefix is compared verbatim, and the remainder is matched on its own. Matching the remainder separately
// is observable: in "x/a**" the "**" then starts the subpattern and so may cross '/'.
bool ignore_pattern::match_path(std::string_view path) const {
  std::string_view glob = glob_;
  std::size_t prefix = literal_prefix_;
  if (glob.front() == '/') {
    glob.remove_prefix(1);
    --prefix;
  }
  if (prefix > 0) {
    if (prefix > path.size() || path.substr(0, prefix) != glob.substr(0, prefix)) return false;
    glob.remove_prefix(prefix);
    path.remove_prefix(prefix);
    if (glob.empty() && path.empty()) return true;
  }
  return wildmatch(glob, path, true);
}

std::vector<numbered_pattern> parse_ignore_file(std::string_view contents) {
  constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";
  if (contents.substr(0, utf8_bom.size()) == utf8_bom) contents.remove_prefix(utf8_bom.size());
  std::vector<numbered_pattern> out;
  std::size_t line_number = 1;
  while (!contents.empty()) {
    const auto end = std::min(contents.find('\n'), contents.size());
    if (auto pattern = ignore_pattern::parse(contents.substr(0, end))) {
      out.push_back({std::move(*pattern), line_number});
    }
    contents.remove_prefix(std::min(end + 1, contents.size()));
    ++line_number;
  }
  return out;
}

}  // namespace ferry::packaging
