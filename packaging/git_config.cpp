#include "packaging/git_config.hpp"

#include <pwd.h>

#include <cctype>

namespace ferry::packaging {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
bool is_key_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; }
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// A cursor over the file, as git's config.c reads it: one character at a time, "\r\n" read as "\n".
class reader {
 public:
  explicit reader(std::string_view text) : text_(text) {}

  bool done() const { return at_ >= text_.size(); }
  char peek() const {
    if (done()) return '\n';
    if (text_[at_] == '\r' && at_ + 1 < text_.size() && text_[at_ + 1] == '\n') return '\n';
    return text_[at_];
  }
  char next() {
    const char c = peek();
    if (!done()) at_ += text_[at_] == '\r' && c == '\n' ? 2 : 1;
    return c;
  }
  void skip_line() {
    while (!done() && next() != '\n') {
    }
  }
  void skip_spaces() {
    while (!done() && is_space(peek())) next();
  }

 private:
  std::string_view text_;
  std::size_t at_ = 0;
};

// After '[': "section]", "section \"sub\"]" or the old "section.sub]". nullopt for a malformed header.
std::optional<std::string> read_section(reader& in) {
  std::string name;
  for (;;) {
    if (in.done()) return std::nullopt;
    const char c = in.next();
    if (c == ']') return name.empty() ? std::nullopt : std::optional(name);
    if (is_space(c)) break;
    if (!is_key_char(c) && c != '.') return std::nullopt;
    name += lower(c);
  }
  // The subsection: quoted, case kept, '\' escapes any character.
  in.skip_spaces();
  if (in.next() != '"') return std::nullopt;
  name += '.';
  for (;;) {
    if (in.done()) return std::nullopt;
    char c = in.next();
    if (c == '\n') return std::nullopt;
    if (c == '"') break;
    if (c == '\\') {
      c = in.next();
      if (c == '\n') return std::nullopt;
    }
    name += c;
  }
  return in.next() == ']' ? std::optional(name) : std::nullopt;
}

// After '=': the value up to the end of the line, with quotes, escapes, comments and continuations.
// Whitespace runs outside quotes become single spaces... as many as there were: git keeps their count.
std::optional<std::string> read_value(reader& in) {
  std::string value;
  std::size_t pending_spaces = 0;
  bool quoted = false, comment = false;
  for (;;) {
    if (in.done()) return quoted ? std::nullopt : std::optional(value);
    char c = in.next();
    if (c == '\n') return quoted ? std::nullopt : std::optional(value);
    if (comment) continue;
    if (is_space(c) && !quoted) {
      if (!value.empty()) ++pending_spaces;
      continue;
    }
    if (!quoted && (c == ';' || c == '#')) {
      comment = true;
      continue;
    }
    value.append(pending_spaces, ' ');
    pending_spaces = 0;
    if (c == '\\') {
      c = in.next();
      switch (c) {
        case '\n': continue;  // a continuation line
        case 't': c = '\t'; break;
        case 'b': c = '\b'; break;
        case 'n': c = '\n'; break;
        case '\\':
        case '"': break;
        default: return std::nullopt;
      }
      value += c;
      continue;
    }
    if (c == '"') {
      quoted = !quoted;
      continue;
    }
    value += c;
  }
}

}  // namespace

std::vector<config_entry> parse_git_config(std::string_view text) {
  constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";
  if (text.starts_with(utf8_bom)) text.remove_prefix(utf8_bom.size());
  reader in(text);
  std::vector<config_entry> out;
  std::optional<std::string> section;
  while (!in.done()) {
    in.skip_spaces();
    const char c = in.peek();
    if (c == '\n') {
      in.next();
      continue;
    }
    if (c == '#' || c == ';') {
      in.skip_line();
      continue;
    }
    if (c == '[') {
      in.next();
      section = read_section(in);
      if (!section) return out;
      continue;  // a key may follow on the same line
    }
    if (!std::isalpha(static_cast<unsigned char>(c)) || !section) return out;
    std::string key;
    while (is_key_char(in.peek()) && !in.done()) key += lower(in.next());
    in.skip_spaces();
    config_entry entry{*section + "." + key, std::nullopt};
    if (in.peek() == '=') {
      in.next();
      in.skip_spaces();
      entry.value = read_value(in);
      if (!entry.value) return out;
    } else if (in.next() != '\n') {
      return out;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::optional<std::string> expand_config_path(std::string_view value, std::string_view home) {
  if (!value.starts_with('~')) return std::string(value);
  const auto slash = value.find('/');
  const auto user = value.substr(1, slash == std::string_view::npos ? std::string_view::npos : slash - 1);
  const auto rest = slash == std::string_view::npos ? std::string_view{} : value.substr(slash);
  if (user.empty()) {
    if (home.empty()) return std::nullopt;
    return std::string(home) + std::string(rest);
  }
  const std::string name(user);
  struct passwd entry {};
  struct passwd* found = nullptr;
  char buffer[4096];
  if (::getpwnam_r(name.c_str(), &entry, buffer, sizeof buffer, &found) != 0 || !found) return std::nullopt;
  return std::string(found->pw_dir) + std::string(rest);
}

}  // namespace ferry::packaging
