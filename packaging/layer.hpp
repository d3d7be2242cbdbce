#pragma once
// A layer: the files of one sys.path entry (the workspace, one distribution of a site-packages
// directory, another directory) that travel together as content-addressed zip objects.
//
// A layer's id is the SHA-256 of its sorted (relative path, mode, content hash) entries, so it changes
// exactly when what a node would extract changes: not on a `touch`, not when the tree moves to another
// path. A layer bigger than the shard size is cut, in path order, into shards that are zipped in
// parallel and stored as separate objects, each with the id of its own entries.
#include "packaging/file_entry.hpp"
#include "packaging/zip_codec.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace ferry::packaging {

struct shard {
  std::size_t first = 0;  // index into layer::files
  std::size_t count = 0;
  std::uint64_t bytes = 0;
  sha256_digest id{};
};

struct layer {
  std::string name;           // "workspace", "numpy", "path:/opt/lib", ...
  std::size_t root_index = 0; // the sys.path entry (index into the shipped roots) it extracts into
  std::vector<file_entry> files;  // sorted by path bytes
  std::uint64_t bytes = 0;
  sha256_digest id{};
  std::vector<shard> shards;

  std::span<const file_entry> files_of(const shard& s) const { return {files.data() + s.first, s.count}; }
};

// The id of entries already sorted by path and carrying their digests.
sha256_digest entries_id(std::span<const file_entry> entries);

// Cuts the layer into shards of at most `shard_size` bytes of content (a single file larger than that is
// a shard of its own) and sets every id. Digests must be filled in.
void seal_layer(layer& l, std::uint64_t shard_size);

// The object key of a shard's zip under the storage prefix: "PREFIX/layers/<hex id>.zip" with deflate,
// "PREFIX/layers/<hex id>.zstd.zip" with zstd (zip_codec.hpp): the id names the entries, the suffix how
// they are compressed.
std::string shard_key(std::string_view prefix, const shard& s, zip_codec codec);
// Where a prefix's keys start: "" stays "", "p" and "p/" both give "p/" (s3://bucket/p names a folder).
std::string key_prefix(std::string_view prefix);

}  // namespace ferry::packaging
