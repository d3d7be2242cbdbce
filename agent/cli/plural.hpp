#pragma once
// A count with its noun, in the singular for one: "1 layer", "2 layers", "0 layers".
#include <fmt/format.h>

#include <string>
#include <string_view>

namespace ferry::agent {

// `plural` defaults to the singular with an "s".
inline std::string counted(std::size_t n, std::string_view singular, std::string_view plural = {}) {
  if (n == 1) return fmt::format("1 {}", singular);
  return plural.empty() ? fmt::format("{} {}s", n, singular) : fmt::format("{} {}", n, plural);
}

}  // namespace ferry::agent
