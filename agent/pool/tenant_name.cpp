#include "agent/pool/tenant_name.hpp"

#include <cstddef>

namespace ferry::agent::pool {

namespace {

constexpr std::size_t max_unix_name = 32;

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

}  // namespace ferry::agent::pool
