#pragma once
// The id of a run of layer entries: the SHA-256 of a version line, then one line per entry in layer order
// (path bytes, NUL, mode in octal, NUL, hex SHA-256 of the content, newline; a piece of a large file has
// "OFFSET+LENGTH" in decimal and a NUL before the hex). Both halves of ferry compute
// it: the workstation names shards and layers by it (layer.hpp), and the node program recomputes it over
// what it inflates, so that only the entries this workstation packed are ever put in place, whatever
// storage holds or a manifest read back from it says. One definition, shared, so the two never drift.
#include "net/digest.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::packaging {

class entries_id_stream {
 public:
  entries_id_stream();
  entries_id_stream(const entries_id_stream&) = delete;
  entries_id_stream& operator=(const entries_id_stream&) = delete;

  // `mode`: S_IFREG or S_IFLNK with the permission bits; `content`: of the file's bytes, or a symlink's target.
  void add(std::string_view path, std::uint32_t mode, const net::sha256_digest& content);
  // A piece of a large file: bytes [offset, offset + length) of it, `content` the piece's own SHA-256. The
  // offset is part of the id, so a piece can never be written at another place than the one it was packed for.
  void add_piece(std::string_view path, std::uint32_t mode, std::uint64_t offset, std::uint64_t length,
                 const net::sha256_digest& content);
  net::sha256_digest finish();

 private:
  net::sha256_stream hash_;
  std::string line_;
};

}  // namespace ferry::packaging
