#pragma once
// Little-endian integers at an offset of a byte string, as zip stores them. Callers check bounds.
#include "packaging/zstd_layout.hpp"
#include <cstdint>
#include <optional>
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

// The data of extra field `id` in a zip extra block (a local header's or the directory's), if it holds one.
inline std::optional<std::string_view> find_extra(std::string_view extra, std::uint16_t id) {
  for (std::size_t at = 0; at + 4 <= extra.size();) {
    const auto length = read_u16(extra, at + 2);
    if (at + 4 + length > extra.size()) break;
    if (read_u16(extra, at) == id) return extra.substr(at + 4, length);
    at += 4 + length;
  }
  return std::nullopt;
}

// ferry's own extra field, "fz": one byte saying what the entry is. 0x01: the shard's zstd dictionary.

enum class ferry_mark { none, dictionary, unknown };

inline ferry_mark read_ferry_mark(std::string_view extra) {
  const auto field = find_extra(extra, packaging::zstd_layout::extra_id);
  if (!field) return ferry_mark::none;
  return *field == std::string_view(&packaging::zstd_layout::extra_dictionary, 1) ? ferry_mark::dictionary : ferry_mark::unknown;
}

}  // namespace ferry::agent::node
