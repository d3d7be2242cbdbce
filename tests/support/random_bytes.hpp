#pragma once
// Bytes that do not compress, the same for the same seed: file contents for tests that move data.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace ferry::test {

inline std::string random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

// A file of `size` such bytes, made eight at a time (files of a hundred megabytes are made quickly).
inline void write_random_file(const std::filesystem::path& path, std::size_t size, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; i += 8) {
    const auto v = rng();
    std::memcpy(bytes.data() + i, &v, std::min<std::size_t>(8, size - i));
  }
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace ferry::test
