#pragma once
// The persistent per-file hash cache: (device, inode, size, mtime_ns) -> SHA-256 of the content. A file
// whose key is unchanged is never read again, and a `touch` changes only the key, not the content hash,
// so the layer id (built from content hashes) stays the same after re-hashing it once.
//
// On disk it is one binary file sorted by (device, inode), loaded whole and searched in place, because a
// warm `ferry pack` of 38k files must be done in a few tens of milliseconds. Lookups are lock-free reads of
// the loaded table; new hashes go to a mutex-guarded side list and are merged on save(). Entries unused
// for `retention` are dropped on save so the file does not grow forever.
#include "packaging/file_entry.hpp"
#include "tracing/diagnostics.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <filesystem>
#include <mutex>
#include <optional>
#include <vector>

namespace ferry::packaging {

class hash_cache {
 public:
  // An empty cache that is never saved (path empty), for --dry-run style callers and tests.
  hash_cache() = default;

  // Reads `file`. A missing file is an empty cache; a damaged or foreign one is ignored (and replaced on
  // save), with the reason in `warning`: a cache is never trusted over the files it describes.
  static hash_cache load(const std::filesystem::path& file, std::string* warning = nullptr);

  // Thread-safe with each other and with insert(). `part` 0 is the file's digest; a file cut into pieces
  // (layer.hpp) has its pieces' digests as parts 1, 2, ... beside it.
  std::optional<sha256_digest> find(const file_key& key, std::uint32_t part = 0) const;
  // `racy`: the file changed so recently that another write within the same mtime tick could go unseen
  // (git's "racily clean" problem); such hashes are used for this run but not persisted.
  void insert(const file_key& key, const sha256_digest& digest, bool racy, std::uint32_t part = 0);

  // Writes the merged table atomically (temporary file, fsync-free rename: a lost cache costs only a
  // re-hash). Does nothing when nothing changed.
  result<void> save(diagnostics& diag);

  std::size_t size() const { return table_.size(); }
  std::size_t hits() const { return hits_.load(); }
  std::size_t inserted() const;

  // Entries unused for longer than this are dropped on save.
  static constexpr std::chrono::hours retention{24 * 30};

  hash_cache(hash_cache&& other) noexcept;
  hash_cache& operator=(hash_cache&& other) noexcept;

  struct record {
    std::uint64_t device;
    std::uint64_t inode;
    std::uint64_t size;
    std::int64_t mtime_ns;
    sha256_digest digest;
    std::uint32_t last_used_day;  // days since the epoch
    std::uint32_t part;           // 0: the file; k: its k-th piece
  };
  static_assert(sizeof(record) == 72);

 private:
  const record* locate(const file_key& key, std::uint32_t part) const;

  std::filesystem::path file_;
  std::vector<record> table_;  // sorted by (device, inode, part)
  // Index of table_ entries looked up this run whose day stamp must move forward on save; a byte per
  // entry, written by concurrent find()s without a lock (each writes only its own byte).
  std::unique_ptr<std::atomic<std::uint8_t>[]> used_;
  mutable std::atomic<std::size_t> hits_{0};
  mutable std::mutex mutex_;
  std::vector<record> added_;
  bool dirty_ = false;
};

// True when a file with this mtime may still be written again within the same timestamp tick.
bool is_racy(std::int64_t mtime_ns, std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

}  // namespace ferry::packaging
