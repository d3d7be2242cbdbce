#pragma once
// What a zstd layer zip holds beyond plain ZIP (docs/packing.md, "zstd shards"), in one place for both
// halves: the workstation's writer (zip_zstd_backend) and the node program's reader (agent/node/zstd_entry,
// zip_directory) must never drift apart.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ferry::packaging::zstd_layout {

// A file over this is independent frames of exactly this many bytes (the last shorter) and a seek table; a
// smaller one is one frame.
inline constexpr std::uint64_t frame_size = 4 << 20;

// The seek table: zstd's seekable format (contrib/seekable_format), a skippable frame at the entry's end
// holding {u32 compressed, u32 decompressed} per frame, then {u32 frames, u8 descriptor 0, u32 footer magic}.
inline constexpr std::uint32_t seek_table_magic = 0x184D2A5E;  // skippable frame, variant 0xE
inline constexpr std::uint32_t seek_footer_magic = 0x8F92EAB1;
inline constexpr std::size_t seek_record = 8;
inline constexpr std::size_t seek_footer = 9;

// The shard's dictionary: its first entry, stored, marked by this extra field (its data one byte, 0x01) in
// both its headers, and named so that a person listing the zip knows it.
inline constexpr std::uint16_t extra_id = 0x7a66;  // "fz"
inline constexpr char extra_dictionary = 0x01;
inline constexpr std::string_view dictionary_name = ".ferry-zstd-dictionary";

}  // namespace ferry::packaging::zstd_layout
