#include "agent/node/entry_name.hpp"

#include "agent/node/error.hpp"

#include <fmt/format.h>

namespace ferry::agent::node {
namespace {

// Printable for a message: control bytes as \xNN, so a name with a newline cannot forge a line.
std::string printable(std::string_view name) {
  std::string out;
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f || c == '\\')
      out += fmt::format("\\x{:02x}", c);
    else
      out.push_back(static_cast<char>(c));
  }
  return out;
}

}  // namespace

result<entry_path> split_entry_name(std::string_view name, std::string_view layer, diagnostics& diag) {
  auto hostile = [&](std::string_view why) {
    diag.set(fmt::format("layer {} holds the entry '{}', which {}: refused", layer, printable(name), why));
    return result<entry_path>(boost::system::in_place_error, make_error_code(errc::hostile_entry));
  };
  if (name.empty()) return hostile("is empty");
  if (name.find('\0') != std::string_view::npos) return hostile("holds a NUL byte");
  if (name.front() == '/') return hostile("is absolute");
  entry_path out;
  std::string_view rest = name;
  if (rest.back() == '/') {
    out.directory = true;
    rest.remove_suffix(1);
  }
  std::vector<std::string_view> parts;
  for (;;) {
    const auto slash = rest.find('/');
    const auto part = rest.substr(0, slash);
    if (part.empty()) return hostile("has an empty component");
    if (part == "." || part == "..") return hostile(fmt::format("has a '{}' component", part));
    parts.push_back(part);
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  out.leaf = parts.back();
  parts.pop_back();
  out.dirs = std::move(parts);
  return out;
}

bool link_stays_inside(const entry_path& at, std::string_view target) {
  if (target.empty() || target.front() == '/') return false;
  long depth = static_cast<long>(at.dirs.size());
  for (;;) {
    const auto slash = target.find('/');
    const auto part = target.substr(0, slash);
    if (part == "..") {
      if (--depth < 0) return false;
    } else if (!part.empty() && part != ".") {
      ++depth;
    }
    if (slash == std::string_view::npos) return true;
    target.remove_prefix(slash + 1);
  }
}

}  // namespace ferry::agent::node
