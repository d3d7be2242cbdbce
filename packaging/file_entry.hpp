#pragma once
// One file of a layer as the walker found it: where it sits in the layer, where its bytes come from,
// and the stat fields that key the hash cache. The walker fills everything but `digest`; hashing
// fills that; the layer id and the zip both read it.
#include "net/digest.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ferry::packaging {

using net::sha256_digest;

// What the hash cache is keyed by: a file whose key is unchanged is never read again.
struct file_key {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;

  friend bool operator==(const file_key&, const file_key&) = default;
};

struct file_entry {
  enum class kind : std::uint8_t { regular, symlink };

  // Relative to the layer root, '/'-separated, raw bytes from the file system (not always UTF-8).
  std::string path;
  kind type = kind::regular;
  // Permission bits only (st_mode & 07777); symlinks are always 0777.
  std::uint32_t permissions = 0644;
  // For regular files: the absolute file to read (differs from root/path when an outside symlink was
  // followed). A plain string: a std::filesystem::path splits itself into components on construction,
  // which costs more than the stat call for each of the tens of thousands of files in a warm scan.
  std::string source;
  // For symlinks kept as symlinks: the target as stored in the link.
  std::string link_target;
  file_key key;  // size is the content size (for symlinks: the target's length)
  // SHA-256 of the content (for symlinks: of the target string); for a file cut into pieces (layer.hpp), the
  // root of its pieces' digests (piece_root), so every piece can be checked on its own.
  sha256_digest digest{};
  // A file cut into pieces: each piece's SHA-256, in order. Empty for every other file.
  std::vector<sha256_digest> piece_digests;
  // Set on the entries of a piece shard only (layer::pieces): this entry is bytes
  // [piece_offset, piece_offset + piece_length) of the file, and `digest` is that piece's.
  std::uint64_t piece_offset = 0;
  std::uint64_t piece_length = 0;

  bool is_piece() const { return piece_length != 0; }
  // What goes into the zip entry: the piece, or the whole file.
  std::uint64_t content_size() const { return is_piece() ? piece_length : key.size; }

  // The zip and layer-id mode: S_IFREG or S_IFLNK with the permission bits.
  std::uint32_t mode() const { return (type == kind::symlink ? 0120000u : 0100000u) | permissions; }
};

}  // namespace ferry::packaging
