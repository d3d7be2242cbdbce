#pragma once
// What this workstation knows about shard zips in storage: shard id and codec -> the SHA-256 and size of
// the zip stored under that id with that codec, and the ETag storage gave it. The two codecs' zips of one
// shard are other bytes under other keys (zip_codec.hpp): each has its own entry, never the other's. A pack that finds a shard's zip already stored
// needs its digest for the manifest; finding it here saves a GET of the zip's sidecar per shard.
//
// An entry counts only while storage shows the same object: the existence check (a HEAD) returns the
// zip's ETag and size, and both must match what was recorded. A shard's key names its entries, not its
// bytes, so another ferry (or another compression level) storing the same shard again leaves other bytes
// under the same key; that object has another ETag, and its digest is then read from its sidecar.
//
// On disk a small text file, one line per shard and codec sorted by id (a zstd zip's id is written
// "<hex>.zstd", a deflate zip's as before), replaced atomically on save (a temporary
// file, then rename). A damaged file or one of another format is ignored and rebuilt, never trusted.
// Entries unused for `retention` are dropped on save. Not thread-safe: pack uses it from the I/O thread.
#include "packaging/zip_codec.hpp"
#include "packaging/zip_digest.hpp"
#include "tracing/diagnostics.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::packaging {

class zip_digest_cache {
 public:
  // An empty cache that is never saved (path empty), for dry-run style callers and tests.
  zip_digest_cache() = default;

  // Reads `file`. A missing file is an empty cache; a damaged or foreign one is ignored (and replaced on
  // save), with the reason in `warning`.
  static zip_digest_cache load(const std::filesystem::path& file, std::string* warning = nullptr);

  // The digest recorded for the shard, when storage's `etag` and `size` for its zip are the recorded ones.
  // An empty `etag` (storage gave none) leaves the size to decide.
  std::optional<zip_digest> find(const sha256_digest& shard_id, zip_codec codec, std::string_view etag,
                                 std::uint64_t size);
  // Records (or replaces) what is stored for the shard with this codec.
  void insert(const sha256_digest& shard_id, zip_codec codec, const zip_digest& digest, std::string_view etag);

  // Writes the table when anything changed; does nothing for a cache without a file.
  result<void> save(diagnostics& diag);

  std::size_t size() const { return entries_.size(); }

  static constexpr std::chrono::hours retention{24 * 30};

 private:
  struct entry {
    zip_digest digest;
    std::string etag;  // without the quotes S3 puts around it
    std::uint32_t last_used_day = 0;  // days since the epoch
  };

  std::filesystem::path file_;
  std::map<std::pair<sha256_digest, zip_codec>, entry> entries_;
  bool dirty_ = false;
};

}  // namespace ferry::packaging
