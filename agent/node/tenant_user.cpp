#include "agent/node/tenant_user.hpp"

#include <charconv>
#include <vector>

namespace ferry::agent::node {
namespace {

constexpr std::string_view user_name_prefix = "ferry-";
constexpr std::size_t max_user_name = 32;

std::vector<std::string_view> passwd_fields(std::string_view line) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto colon = line.find(':');
    out.push_back(line.substr(0, colon));
    if (colon == std::string_view::npos) return out;
    line.remove_prefix(colon + 1);
  }
}

template <class T>
bool passwd_number(std::string_view text, T& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

bool tenant_user_ok(std::string_view name) {
  if (!name.starts_with(user_name_prefix) || name.size() <= user_name_prefix.size() || name.size() > max_user_name) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::optional<passwd_entry> find_passwd(std::string_view passwd, std::string_view name) {
  while (!passwd.empty()) {
    const auto newline = passwd.find('\n');
    const auto line = passwd.substr(0, newline);
    passwd.remove_prefix(newline == std::string_view::npos ? passwd.size() : newline + 1);
    const auto f = passwd_fields(line);
    if (f.size() != 7 || f[0] != name) continue;
    passwd_entry e{std::string(f[0]), 0, 0, std::string(f[4]), std::string(f[5]), std::string(f[6])};
    if (!passwd_number(f[2], e.uid) || !passwd_number(f[3], e.gid)) continue;
    return e;
  }
  return std::nullopt;
}

bool made_for_tenant(const passwd_entry& entry) {
  return entry.gecos == tenant_user_comment && entry.uid != 0 && entry.gid != 0 && tenant_user_ok(entry.name);
}

}  // namespace ferry::agent::node
