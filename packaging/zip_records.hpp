#pragma once
// The byte layout of the ZIP records ferry's own container writes (APPNOTE 6.3.x, little-endian): local
// headers, data descriptors, central directory headers and the end records, Zip64 included. Kept apart
// from the writer so that the Zip64 forms, which only files past 4 GiB need, are tested without them.
//
// Every entry has the DOS time 1980-01-01 00:00, "version made by" Unix (3 << 8 | 63) and its st_mode in
// the high 16 bits of the external attributes, as the deflate backend's libarchive writes them.
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::packaging::zip_records {

inline constexpr std::uint32_t u32_max = 0xFFFFFFFF;
inline constexpr std::uint16_t flag_descriptor = 1 << 3;  // CRC and sizes follow the data
inline constexpr std::uint16_t flag_utf8 = 1 << 11;       // the name is UTF-8

struct entry {
  std::string name;
  std::uint16_t method = 0;  // 0 stored, 93 zstd
  std::uint16_t flags = 0;
  std::uint32_t mode = 0;    // st_mode
  std::uint32_t crc = 0;
  std::uint64_t compressed = 0;
  std::uint64_t size = 0;
  std::uint64_t offset = 0;  // of the local header
  bool zip64_local = false;  // sizes may pass 4 GiB: Zip64 extra in the local header, 8-byte descriptor
  bool dictionary = false;   // carries the 0x7a66 extra field in both headers
};

// With flag_descriptor the CRC and sizes are written as 0 (0xFFFFFFFF plus a Zip64 extra of zeros when
// zip64_local) and the data descriptor gives them.
// A little-endian 32-bit field, as every ZIP record (and zstd's seek table) writes them.
void put32(std::string& out, std::uint32_t v);

void append_local_header(std::string& out, const entry& e);
void append_data_descriptor(std::string& out, const entry& e);
// Sizes and the offset that pass 0xFFFFFFFF are saturated and given in a Zip64 extra, in APPNOTE's order.
void append_central_header(std::string& out, const entry& e);
// The end of central directory record, preceded by the Zip64 end record and locator when the count,
// the directory's size or its offset does not fit the 16/32-bit fields.
void append_end_records(std::string& out, std::uint64_t entries, std::uint64_t directory_offset,
                        std::uint64_t directory_size);

}  // namespace ferry::packaging::zip_records
