#pragma once
// A zip's central directory, read without I/O: the node program fetches a shard's last bytes first, finds
// the directory there (or fetches the rest of it), and so knows every entry's name, sizes, CRC and mode
// before any file content arrives. That lets it check a shard against the manifest before extracting a
// byte, and extract entries whose local headers do not carry their sizes (ferry's zips write a data
// descriptor after every file, so only the central directory says how long a stored entry is).
//
// Zip64 is read (an entry or an archive over 4 GiB); encryption, multi-disk archives and methods other
// than stored (0), deflate (8) and zstd (93, APPNOTE 6.3.7) are refused as damaged: ferry never writes them.
//
// A zstd shard may begin with its dictionary: an entry marked by ferry's extra field 0x7a66 ("fz") = 0x01,
// stored, at most 1 MiB, the first entry and the only one so marked. The mark alone says so, never the name.
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent::node {

struct zip_entry {
  std::string name;               // exactly the stored bytes
  std::uint64_t local_offset = 0;  // of its local header
  std::uint64_t compressed = 0;
  std::uint64_t size = 0;          // uncompressed
  std::uint32_t crc32 = 0;
  std::uint16_t method = 0;        // 0 stored, 8 deflate, 93 zstd
  std::uint32_t mode = 0;          // st_mode from a Unix "version made by"; 0 when the zip did not say
  bool dictionary = false;         // the shard's zstd dictionary (ferry's extra field), not a file

  bool is_directory() const;
  bool is_symlink() const;
};

struct zip_tail {
  std::uint64_t directory_offset = 0;  // where the central directory starts
  std::uint64_t directory_size = 0;
  std::uint64_t entries = 0;
};

// How many of a zip's last bytes hold its end records whatever its comment: the EOCD (22 bytes and a
// comment of at most 65,535), and before it the Zip64 locator (20) and record (56).
inline constexpr std::uint64_t tail_span = 22 + 65535 + 20 + 56;

// Finds the end records in `tail`, the last bytes of a zip of `zip_size` bytes.
result<zip_tail> parse_tail(std::string_view tail, std::uint64_t zip_size, diagnostics& diag);

// Reads the central directory (its bytes exactly) into entries sorted by local offset, each checked to
// lie before the directory and not to overlap the next, and a dictionary entry to be the first.
result<std::vector<zip_entry>> parse_directory(std::string_view directory, const zip_tail& tail, diagnostics& diag);

}  // namespace ferry::agent::node
