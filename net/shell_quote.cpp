#include "net/shell_quote.hpp"

#include <stdexcept>

namespace ferry::net {

std::string shell_quote(std::string_view arg) {
  if (arg.find('\0') != std::string_view::npos) throw std::invalid_argument("a command argument holds a NUL byte");
  std::string out;
  out.reserve(arg.size() + 2);
  out += '\'';
  for (const char c : arg) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  out += '\'';
  return out;
}

std::string quote_argv(std::span<const std::string> argv) {
  std::string out;
  for (const auto& arg : argv) {
    if (!out.empty()) out += ' ';
    out += shell_quote(arg);
  }
  return out;
}

std::string quote_argv(std::initializer_list<std::string_view> argv) {
  std::string out;
  for (const auto arg : argv) {
    if (!out.empty()) out += ' ';
    out += shell_quote(arg);
  }
  return out;
}

}  // namespace ferry::net
