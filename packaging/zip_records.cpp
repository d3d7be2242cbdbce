#include "packaging/zip_records.hpp"

#include "packaging/zstd_layout.hpp"

namespace ferry::packaging::zip_records {
namespace {

constexpr std::uint16_t made_by = (3 << 8) | 63;  // Unix, APPNOTE 6.3
constexpr std::uint16_t dos_time = 0;             // 00:00:00
constexpr std::uint16_t dos_date = (1 << 5) | 1;  // 1980-01-01

void put16(std::string& out, std::uint16_t v) {
  out.push_back(static_cast<char>(v & 0xFF));
  out.push_back(static_cast<char>(v >> 8));
}
void put64(std::string& out, std::uint64_t v) {
  put32(out, static_cast<std::uint32_t>(v & u32_max));
  put32(out, static_cast<std::uint32_t>(v >> 32));
}

std::uint32_t saturated(std::uint64_t v) { return v >= u32_max ? u32_max : static_cast<std::uint32_t>(v); }

std::uint16_t version_needed(const entry& e, bool zip64) {
  if (e.method == 93) return 63;  // APPNOTE 6.3.7: zstd
  return zip64 ? 45 : 20;
}

void put_dictionary_extra(std::string& out) {
  put16(out, zstd_layout::extra_id);
  put16(out, 1);
  out.push_back(zstd_layout::extra_dictionary);
}

}  // namespace

void put32(std::string& out, std::uint32_t v) {
  put16(out, static_cast<std::uint16_t>(v & 0xFFFF));
  put16(out, static_cast<std::uint16_t>(v >> 16));
}

void append_local_header(std::string& out, const entry& e) {
  const bool later = e.flags & flag_descriptor;
  put32(out, 0x04034b50);
  put16(out, version_needed(e, e.zip64_local));
  put16(out, e.flags);
  put16(out, e.method);
  put16(out, dos_time);
  put16(out, dos_date);
  put32(out, later ? 0 : e.crc);
  const std::uint32_t unknown = e.zip64_local ? u32_max : 0;
  put32(out, later ? unknown : saturated(e.compressed));
  put32(out, later ? unknown : saturated(e.size));
  put16(out, static_cast<std::uint16_t>(e.name.size()));
  put16(out, static_cast<std::uint16_t>((e.zip64_local ? 20 : 0) + (e.dictionary ? 5 : 0)));
  out.append(e.name);
  if (e.zip64_local) {
    put16(out, 0x0001);
    put16(out, 16);
    put64(out, later ? 0 : e.size);
    put64(out, later ? 0 : e.compressed);
  }
  if (e.dictionary) put_dictionary_extra(out);
}

void append_data_descriptor(std::string& out, const entry& e) {
  put32(out, 0x08074b50);
  put32(out, e.crc);
  if (e.zip64_local) {
    put64(out, e.compressed);
    put64(out, e.size);
  } else {
    put32(out, static_cast<std::uint32_t>(e.compressed));
    put32(out, static_cast<std::uint32_t>(e.size));
  }
}

void append_central_header(std::string& out, const entry& e) {
  std::string zip64;
  if (e.size >= u32_max) put64(zip64, e.size);
  if (e.compressed >= u32_max) put64(zip64, e.compressed);
  if (e.offset >= u32_max) put64(zip64, e.offset);
  put32(out, 0x02014b50);
  put16(out, made_by);
  put16(out, version_needed(e, !zip64.empty() || e.zip64_local));
  put16(out, e.flags);
  put16(out, e.method);
  put16(out, dos_time);
  put16(out, dos_date);
  put32(out, e.crc);
  put32(out, saturated(e.compressed));
  put32(out, saturated(e.size));
  put16(out, static_cast<std::uint16_t>(e.name.size()));
  put16(out, static_cast<std::uint16_t>((zip64.empty() ? 0 : 4 + zip64.size()) + (e.dictionary ? 5 : 0)));
  put16(out, 0);  // comment
  put16(out, 0);  // disk
  put16(out, 0);  // internal attributes
  put32(out, e.mode << 16);
  put32(out, saturated(e.offset));
  out.append(e.name);
  if (!zip64.empty()) {
    put16(out, 0x0001);
    put16(out, static_cast<std::uint16_t>(zip64.size()));
    out.append(zip64);
  }
  if (e.dictionary) put_dictionary_extra(out);
}

void append_end_records(std::string& out, std::uint64_t entries, std::uint64_t directory_offset,
                        std::uint64_t directory_size) {
  const bool zip64 = entries >= 0xFFFF || directory_offset >= u32_max || directory_size >= u32_max;
  if (zip64) {
    const auto record_offset = directory_offset + directory_size;
    put32(out, 0x06064b50);
    put64(out, 44);  // the record's size after this field
    put16(out, made_by);
    put16(out, 45);
    put32(out, 0);  // this disk
    put32(out, 0);  // the directory's disk
    put64(out, entries);
    put64(out, entries);
    put64(out, directory_size);
    put64(out, directory_offset);
    put32(out, 0x07064b50);
    put32(out, 0);
    put64(out, record_offset);
    put32(out, 1);  // disks
  }
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  const auto count = static_cast<std::uint16_t>(entries >= 0xFFFF ? 0xFFFF : entries);
  put16(out, count);
  put16(out, count);
  put32(out, saturated(directory_size));
  put32(out, saturated(directory_offset));
  put16(out, 0);  // comment
}

}  // namespace ferry::packaging::zip_records
