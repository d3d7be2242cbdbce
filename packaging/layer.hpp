#pragma once
// A layer: the files of one sys.path entry (the workspace, one distribution of a site-packages
// directory, another directory) that travel together as content-addressed zip objects.
//
// A layer's id is the SHA-256 of its sorted (relative path, mode, content hash) entries, so it changes
// exactly when what a node would extract changes: not on a `touch`, not when the tree moves to another
// path. A layer bigger than the shard size is cut, in path order, into shards that are zipped in
// parallel and stored as separate objects, each with the id of its own entries.
//
// A file over piece_size is cut into pieces, each a shard of its own. A 600 MB shared library is then
// twenty objects that compress on every core, go up as they are made, and are fetched, checked and written
// at their offsets on a node while the later ones are still being packed: one stream of 600 MB would be
// one core's work on each side, and no node could read it before its last byte was stored. The pieces
// are fixed in size (not a setting), so a file's digest (the root of its pieces' digests) and with it the
// layer's id stay the same on every workstation.
#include "packaging/file_entry.hpp"
#include "packaging/zip_codec.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace ferry::packaging {

inline constexpr std::uint64_t piece_size = 32 << 20;

// How many pieces a file of `size` bytes is cut into: 0 for a file of at most piece_size (it stays whole).
std::uint64_t piece_count(std::uint64_t size);
// A cut file's digest: the SHA-256 of a version line and its pieces' digests, in order.
sha256_digest piece_root(std::span<const sha256_digest> pieces);

struct shard {
  std::size_t first = 0;  // index into layer::files, or layer::pieces for a piece shard
  std::size_t count = 0;
  std::uint64_t bytes = 0;
  sha256_digest id{};
  bool piece = false;  // one piece of a cut file: its one entry is layer::pieces[first]
};

struct layer {
  std::string name;           // "workspace", "numpy", "path:/opt/lib", ...
  std::size_t root_index = 0; // the sys.path entry (index into the shipped roots) it extracts into
  std::vector<file_entry> files;  // sorted by path bytes
  std::uint64_t bytes = 0;
  sha256_digest id{};
  std::vector<shard> shards;
  // One entry per piece of every cut file (file_entry::is_piece), made by seal_layer.
  std::vector<file_entry> pieces;

  std::span<const file_entry> files_of(const shard& s) const {
    return {(s.piece ? pieces.data() : files.data()) + s.first, s.count};
  }
};

// The id of entries already sorted by path and carrying their digests.
sha256_digest entries_id(std::span<const file_entry> entries);

// Cuts the layer into shards of at most `shard_size` bytes of content (a single file larger than that is
// a shard of its own; a file over piece_size is a shard per piece) and sets every id. Digests must be
// filled in, and the piece digests of every file over piece_size.
void seal_layer(layer& l, std::uint64_t shard_size);

// The object key of a shard's zip under the storage prefix: "PREFIX/layers/<hex id>.zip" with deflate,
// "PREFIX/layers/<hex id>.zstd.zip" with zstd (zip_codec.hpp): the id names the entries, the suffix how
// they are compressed.
std::string shard_key(std::string_view prefix, const shard& s, zip_codec codec);
// Where a prefix's keys start: "" stays "", "p" and "p/" both give "p/" (s3://bucket/p names a folder).
std::string key_prefix(std::string_view prefix);

}  // namespace ferry::packaging
