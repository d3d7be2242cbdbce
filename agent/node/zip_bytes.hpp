#pragma once
// Little-endian integers at an offset of a byte string, as zip stores them. Callers check bounds.
#include <cstdint>
#include <string_view>

namespace ferry::agent::node {

inline std::uint16_t read_u16(std::string_view b, std::size_t at) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(b[at]) |
                                    static_cast<unsigned char>(b[at + 1]) << 8);
}
inline std::uint32_t read_u32(std::string_view b, std::size_t at) {
  return static_cast<std::uint32_t>(read_u16(b, at)) | static_cast<std::uint32_t>(read_u16(b, at + 2)) << 16;
}
inline std::uint64_t read_u64(std::string_view b, std::size_t at) {
  return static_cast<std::uint64_t>(read_u32(b, at)) | static_cast<std::uint64_t>(read_u32(b, at + 4)) << 32;
}

}  // namespace ferry::agent::node
