#include "agent/pool/tenant_name.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>

namespace ferry::agent::pool {

namespace {

constexpr std::size_t max_unix_name = 32;
constexpr std::string_view user_prefix = "ferry-";
constexpr std::size_t kept_of_long = 17;  // "ferry-" 6 + 17 + "-" + 8 hex = 32

// FNV-1a: stable across builds and hosts, which the user's name must be (every agent derives it).
std::uint32_t fnv1a(std::string_view text) {
  std::uint32_t h = 2166136261u;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

}  // namespace

std::string tenant_unix_name(std::string_view wanted) {
  std::string out;
  for (const char raw : wanted) {
    char c = raw >= 'A' && raw <= 'Z' ? static_cast<char>(raw - 'A' + 'a') : raw;
    if (c == '@') c = '-';
    if (c == '.') c = '_';
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (ok) out += c;
  }
  if (out.empty()) return out;
  if (!((out[0] >= 'a' && out[0] <= 'z') || out[0] == '_')) out.insert(out.begin(), '_');
  if (out.size() > max_unix_name) out.resize(max_unix_name);
  return out;
}

std::string tenant_of(std::string_view configured, std::string_view user, std::string_view host) {
  if (!configured.empty()) return tenant_unix_name(configured);
  std::string both(user);
  both += '@';
  both += host;
  return tenant_unix_name(both);
}

std::string tenant_user_name(std::string_view tenant) {
  if (tenant.empty()) return {};
  if (user_prefix.size() + tenant.size() <= max_unix_name) return fmt::format("{}{}", user_prefix, tenant);
  return fmt::format("{}{}-{:08x}", user_prefix, tenant.substr(0, kept_of_long), fnv1a(tenant));
}

}  // namespace ferry::agent::pool
