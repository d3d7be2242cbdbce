#include "agent/node/zip_directory.hpp"

#include "agent/node/entry_name.hpp"
#include "agent/node/error.hpp"
#include "agent/node/zip_bytes.hpp"
#include "agent/node/zstd_entry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <sys/stat.h>

namespace ferry::agent::node {
namespace {

constexpr std::uint32_t eocd_signature = 0x06054b50;
constexpr std::uint32_t zip64_locator_signature = 0x07064b50;
constexpr std::uint32_t zip64_eocd_signature = 0x06064b50;
constexpr std::uint32_t directory_signature = 0x02014b50;
constexpr std::size_t eocd_size = 22;
constexpr std::size_t zip64_locator_size = 20;
constexpr std::size_t zip64_eocd_size = 56;
constexpr std::size_t directory_header_size = 46;
constexpr std::uint32_t u32_max = 0xffffffff;
constexpr std::uint16_t u16_max = 0xffff;

error_code damaged(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::bad_zip);
}

// The last EOCD signature whose comment length reaches exactly the end of the zip.
std::optional<std::size_t> find_eocd(std::string_view tail) {
  if (tail.size() < eocd_size) return std::nullopt;
  for (std::size_t at = tail.size() - eocd_size + 1; at-- > 0;) {
    if (read_u32(tail, at) != eocd_signature) continue;
    if (at + eocd_size + read_u16(tail, at + 20) == tail.size()) return at;
  }
  return std::nullopt;
}

// Fills the Zip64 extra field's values for the fields whose 32-bit form is saturated.
result<void> read_zip64_extra(std::string_view extra, zip_entry& e, bool size_max, bool compressed_max,
                              bool offset_max, diagnostics& diag) {
  for (std::size_t at = 0; at + 4 <= extra.size();) {
    const auto id = read_u16(extra, at);
    const auto length = read_u16(extra, at + 2);
    if (at + 4 + length > extra.size()) break;
    if (id == 0x0001) {
      std::string_view field = extra.substr(at + 4, length);
      std::size_t pos = 0;
      auto next = [&](std::uint64_t& out) {
        if (pos + 8 > field.size()) return false;
        out = read_u64(field, pos);
        pos += 8;
        return true;
      };
      if ((size_max && !next(e.size)) || (compressed_max && !next(e.compressed)) ||
          (offset_max && !next(e.local_offset)))
        return damaged(diag, fmt::format("entry '{}' has a short Zip64 field", printable_name(e.name)));
      return {};
    }
    at += 4 + length;
  }
  if (size_max || compressed_max || offset_max)
    return damaged(diag, fmt::format("entry '{}' lacks the Zip64 field its sizes call for", printable_name(e.name)));
  return {};
}

// ferry's mark on an entry, checked where it is read: a dictionary must be stored, small, and first.
result<void> read_mark(std::string_view extra, std::uint64_t index, zip_entry& e, diagnostics& diag) {
  const auto mark = read_ferry_mark(extra);
  if (mark == ferry_mark::none) return {};
  const auto name = printable_name(e.name);
  if (mark == ferry_mark::unknown)
    return damaged(diag, fmt::format("entry '{}' carries a ferry extra field (0x7a66) this node does not know", name));
  if (index != 0) return damaged(diag, fmt::format("the zstd dictionary '{}' is not the zip's first entry", name));
  if (e.method != 0)
    return damaged(diag, fmt::format("the zstd dictionary '{}' is compressed (method {}); it is stored", name, e.method));
  if (e.size > zstd_dictionary_limit)
    return damaged(diag, fmt::format("the zstd dictionary '{}' is {} bytes, over the {} a node loads", name, e.size,
                                     zstd_dictionary_limit));
  e.dictionary = true;
  return {};
}

}  // namespace

bool zip_entry::is_directory() const { return !name.empty() && name.back() == '/'; }
bool zip_entry::is_symlink() const { return S_ISLNK(mode); }

result<zip_tail> parse_tail(std::string_view tail, std::uint64_t zip_size, diagnostics& diag) {
  const auto at = find_eocd(tail);
  if (!at) return damaged(diag, "no end of central directory record");
  const std::uint64_t tail_start = zip_size - tail.size();
  zip_tail t;
  if (read_u16(tail, *at + 4) != 0 || read_u16(tail, *at + 6) != 0)
    return damaged(diag, "a multi-disk zip");
  t.entries = read_u16(tail, *at + 10);
  t.directory_size = read_u32(tail, *at + 12);
  t.directory_offset = read_u32(tail, *at + 16);
  const bool zip64 = t.entries == u16_max || t.directory_size == u32_max || t.directory_offset == u32_max;
  if (zip64 || (*at >= zip64_locator_size && read_u32(tail, *at - zip64_locator_size) == zip64_locator_signature)) {
    if (*at < zip64_locator_size || read_u32(tail, *at - zip64_locator_size) != zip64_locator_signature)
      return damaged(diag, "a Zip64 archive without its Zip64 locator");
    const auto record = read_u64(tail, *at - zip64_locator_size + 8);
    // Written so that no sum can wrap: a record offset near 2^64 must not pass as one inside the tail.
    const std::uint64_t room = *at - zip64_locator_size;  // the tail's bytes before the locator
    if (record < tail_start || room < zip64_eocd_size || record - tail_start > room - zip64_eocd_size)
      return damaged(diag, "the Zip64 end record is not where its locator says");
    const auto r = static_cast<std::size_t>(record - tail_start);
    if (read_u32(tail, r) != zip64_eocd_signature) return damaged(diag, "a damaged Zip64 end record");
    t.entries = read_u64(tail, r + 32);
    t.directory_size = read_u64(tail, r + 40);
    t.directory_offset = read_u64(tail, r + 48);
  }
  const std::uint64_t directory_end = zip_size - (tail.size() - *at);
  if (t.directory_offset > directory_end || t.directory_size > directory_end - t.directory_offset)
    return damaged(diag, "the central directory lies outside the zip");
  return t;
}

result<std::vector<zip_entry>> parse_directory(std::string_view directory, const zip_tail& tail, diagnostics& diag) {
  std::vector<zip_entry> entries;
  // Each entry takes at least 46 bytes: a count beyond that is a lie, and must not size an allocation.
  if (tail.entries > directory.size() / directory_header_size)
    return damaged(diag, fmt::format("{} entries cannot fit in a central directory of {} bytes", tail.entries,
                                     directory.size()));
  entries.reserve(static_cast<std::size_t>(tail.entries));
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < tail.entries; ++i) {
    if (at + directory_header_size > directory.size() || read_u32(directory, at) != directory_signature)
      return damaged(diag, fmt::format("central directory entry {} is damaged", i + 1));
    zip_entry e;
    const auto made_by = read_u16(directory, at + 4);
    const auto flags = read_u16(directory, at + 8);
    e.method = read_u16(directory, at + 10);
    e.crc32 = read_u32(directory, at + 16);
    const std::uint32_t compressed = read_u32(directory, at + 20);
    const std::uint32_t size = read_u32(directory, at + 24);
    const auto name_length = read_u16(directory, at + 28);
    const auto extra_length = read_u16(directory, at + 30);
    const auto comment_length = read_u16(directory, at + 32);
    const auto disk = read_u16(directory, at + 34);
    const auto external = read_u32(directory, at + 38);
    const std::uint32_t offset = read_u32(directory, at + 42);
    const std::size_t end = at + directory_header_size + name_length + extra_length + comment_length;
    if (end > directory.size()) return damaged(diag, fmt::format("central directory entry {} is cut short", i + 1));
    e.name.assign(directory.substr(at + directory_header_size, name_length));
    e.compressed = compressed;
    e.size = size;
    e.local_offset = offset;
    if (auto r = read_zip64_extra(directory.substr(at + directory_header_size + name_length, extra_length), e,
                                  size == u32_max, compressed == u32_max, offset == u32_max, diag);
        !r)
      return r.error();
    if ((made_by >> 8) == 3) e.mode = external >> 16;  // Unix
    if (disk != 0 && disk != u16_max) return damaged(diag, fmt::format("entry '{}' is on another disk", printable_name(e.name)));
    if (flags & 1) return damaged(diag, fmt::format("entry '{}' is encrypted", printable_name(e.name)));
    if (e.method != 0 && e.method != 8 && e.method != 93)
      return damaged(diag, fmt::format("entry '{}' uses compression method {}", printable_name(e.name), e.method));
    if (e.method == 0 && e.compressed != e.size)
      return damaged(diag, fmt::format("stored entry '{}' has two sizes", printable_name(e.name)));
    if (auto r = read_mark(directory.substr(at + directory_header_size + name_length, extra_length), i, e, diag); !r)
      return r.error();
    entries.push_back(std::move(e));
    at = end;
  }
  if (at != directory.size()) return damaged(diag, "the central directory holds more than its entries");
  std::stable_sort(entries.begin(), entries.end(),
                   [](const zip_entry& a, const zip_entry& b) { return a.local_offset < b.local_offset; });
  // First in the directory, and first in the body too: every frame after it may need it.
  for (std::size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].dictionary)
      return damaged(diag, fmt::format("the zstd dictionary '{}' is not the zip's first entry",
                                       printable_name(entries[i].name)));
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const auto limit = i + 1 < entries.size() ? entries[i + 1].local_offset : tail.directory_offset;
    // The local header is at least 30 bytes and the name as long as the directory's.
    const auto least = 30 + e.name.size();
    if (e.local_offset > limit || limit - e.local_offset < least || limit - e.local_offset - least < e.compressed)
      return damaged(diag, fmt::format("entry '{}' overlaps the next one", printable_name(e.name)));
  }
  return entries;
}

}  // namespace ferry::agent::node
