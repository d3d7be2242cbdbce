#include "packaging/python_imports.hpp"

#include <algorithm>
#include <cctype>

namespace ferry::packaging {
namespace {

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// `word` followed by a space or tab at the start of `line`: the rest after it, else nothing.
bool keyword(std::string_view& line, std::string_view word) {
  if (!line.starts_with(word) || line.size() == word.size()) return false;
  const char next = line[word.size()];
  if (next != ' ' && next != '\t') return false;
  line = trim(line.substr(word.size()));
  return true;
}

// The first dotted component of a module path ("a.b.c" gives "a"), if it is a name.
std::string_view head_of(std::string_view module) {
  module = trim(module);
  std::size_t n = 0;
  while (n < module.size() && is_name_char(module[n])) ++n;
  if (n == 0 || std::isdigit(static_cast<unsigned char>(module[0]))) return {};
  return module.substr(0, n);
}

}  // namespace

std::vector<std::string> imported_names(std::string_view source) {
  std::vector<std::string> out;
  while (!source.empty()) {
    const auto nl = source.find('\n');
    auto line = trim(source.substr(0, nl));
    source.remove_prefix(nl == std::string_view::npos ? source.size() : nl + 1);
    // Statements after `;` on the same line, and the body of `try:`/`if x:` one-liners, are rare enough
    // to leave out; a line that starts with the keyword is the common case.
    if (keyword(line, "import")) {
      line = line.substr(0, line.find('#'));
      while (!line.empty()) {
        const auto comma = line.find(',');
        if (const auto name = head_of(line.substr(0, comma)); !name.empty()) out.emplace_back(name);
        line.remove_prefix(comma == std::string_view::npos ? line.size() : comma + 1);
      }
    } else if (keyword(line, "from")) {
      if (!line.starts_with('.')) {
        if (const auto name = head_of(line); !name.empty()) out.emplace_back(name);
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace ferry::packaging
