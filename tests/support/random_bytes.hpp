#pragma once
// Bytes that do not compress, the same for the same seed: file contents for tests that move data.
#include <random>
#include <string>

namespace ferry::test {

inline std::string random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

}  // namespace ferry::test
