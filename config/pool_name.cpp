#include "config/pool_name.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace ferry::config {

std::string pool_name_problem(std::string_view name) {
  const bool ok = !name.empty() && name.size() <= 64 && name != "." && name != ".." &&
                  std::all_of(name.begin(), name.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
                  });
  if (ok) return {};
  return fmt::format("'{}' is not a pool name: letters, digits, '.', '_' and '-', up to 64, not . or ..", name);
}

}  // namespace ferry::config
