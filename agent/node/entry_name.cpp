#include "agent/node/entry_name.hpp"

#include "agent/node/error.hpp"

#include <fmt/format.h>

namespace ferry::agent::node {
namespace {

constexpr std::size_t max_name = 4096;  // PATH_MAX: a longer name could not be opened anyway
constexpr std::size_t max_depth = 256;  // the writer holds a descriptor per level

// The length of the valid UTF-8 sequence at the start of `s`, or 0.
std::size_t utf8_sequence(std::string_view s) {
  const auto c = static_cast<unsigned char>(s[0]);
  const std::size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || s.size() < n) return 0;
  for (std::size_t i = 1; i < n; ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) return 0;
  return n;
}

}  // namespace

std::string printable_name(std::string_view name) {
  std::string out;
  while (!name.empty()) {
    const auto c = static_cast<unsigned char>(name[0]);
    std::size_t take = 1;
    if (c >= 0x80 && (take = utf8_sequence(name)) > 0) {
      out.append(name.substr(0, take));
    } else if (c < 0x20 || c == 0x7f || c == '\\' || c >= 0x80) {
      take = 1;
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
    name.remove_prefix(take);
  }
  return out;
}

result<entry_path> split_entry_name(std::string_view name, std::string_view layer, diagnostics& diag) {
  auto hostile = [&](std::string_view why) {
    diag.set(fmt::format("layer {} holds the entry '{}', which {}: refused", layer,
                         printable_name(name.substr(0, 256)), why));
    return result<entry_path>(boost::system::in_place_error, make_error_code(errc::hostile_entry));
  };
  if (name.empty()) return hostile("is empty");
  if (name.find('\0') != std::string_view::npos) return hostile("holds a NUL byte");
  if (name.front() == '/') return hostile("is absolute");
  if (name.size() > max_name) return hostile(fmt::format("is over {} bytes long", max_name));
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
  if (parts.size() > max_depth) return hostile(fmt::format("is over {} directories deep", max_depth));
  out.leaf = parts.back();
  parts.pop_back();
  out.dirs = std::move(parts);
  return out;
}

bool link_stays_inside(const entry_path& at, std::string_view target) {
  if (target.empty() || target.front() == '/') return false;
  long depth = static_cast<long>(at.dirs.size());
  bool descending = false;  // a name came: from here on only names, never `..`
  for (;;) {
    const auto slash = target.find('/');
    const auto part = target.substr(0, slash);
    if (part == "..") {
      if (descending || --depth < 0) return false;
    } else if (!part.empty() && part != ".") {
      descending = true;
    }
    if (slash == std::string_view::npos) return true;
    target.remove_prefix(slash + 1);
  }
}

}  // namespace ferry::agent::node
