#include "packaging/hash_cache.hpp"

#include "net/atomic_file.hpp"
#include "packaging/layer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace ferry::packaging {
namespace {

// Version 2: a file over the piece size has the root of its pieces' digests as its digest, and the pieces
// beside it. A version-1 cache (whole-file digests, the same layout) is read without its files over the
// piece size, so no old digest of a large file passes for a root and every other file stays hashed.
constexpr char magic[8] = {'F', 'E', 'R', 'R', 'Y', 'H', 'C', '2'};
constexpr char magic_v1[8] = {'F', 'E', 'R', 'R', 'Y', 'H', 'C', '1'};

struct file_header {
  char magic[8];
  std::uint64_t count;
};

bool key_less(const hash_cache::record& a, const hash_cache::record& b) {
  if (a.device != b.device) return a.device < b.device;
  return a.inode != b.inode ? a.inode < b.inode : a.part < b.part;
}

std::uint32_t today(std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) {
  return static_cast<std::uint32_t>(std::chrono::duration_cast<std::chrono::hours>(now.time_since_epoch()).count() / 24);
}

bool read_all(int fd, char* out, std::size_t size) {
  while (size > 0) {
    const auto n = ::read(fd, out, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// The table as stored, or the reason it cannot be used.
result<std::vector<hash_cache::record>> read_table(const std::filesystem::path& file, std::string& why, bool& old) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) why = fmt::format("{}: {}", file.string(), std::strerror(errno));
    return std::vector<hash_cache::record>{};
  }
  file_header header{};
  std::vector<hash_cache::record> table;
  bool ok = read_all(fd, reinterpret_cast<char*>(&header), sizeof header) && header.count < (1u << 26);
  old = ok && std::memcmp(header.magic, magic_v1, sizeof magic_v1) == 0;
  ok = ok && (old || std::memcmp(header.magic, magic, sizeof magic) == 0);
  if (ok) {
    table.resize(header.count);
    ok = read_all(fd, reinterpret_cast<char*>(table.data()), table.size() * sizeof(hash_cache::record));
    char extra;
    ok = ok && ::read(fd, &extra, 1) == 0;
  }
  ::close(fd);
  // Order is what makes lookups correct: a file that is not sorted was not written by us.
  if (ok) ok = std::is_sorted(table.begin(), table.end(), key_less);
  if (!ok) {
    why = fmt::format("{}: not a ferry hash cache or damaged; it will be rebuilt", file.string());
    return std::vector<hash_cache::record>{};
  }
  if (old) {
    std::erase_if(table, [](const hash_cache::record& r) { return r.part != 0 || r.size > piece_size; });
  }
  return table;
}

}  // namespace

bool is_racy(std::int64_t mtime_ns, std::chrono::system_clock::time_point now) {
  // Two seconds covers every file system's timestamp granularity ferry meets (FAT's is the coarsest).
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  return mtime_ns >= now_ns - 2'000'000'000;
}

hash_cache hash_cache::load(const std::filesystem::path& file, std::string* warning) {
  hash_cache cache;
  cache.file_ = file;
  std::string why;
  bool old = false;
  cache.table_ = std::move(read_table(file, why, old).value());
  if (old) cache.dirty_ = true;  // saved as version 2
  if (!why.empty()) {
    cache.dirty_ = true;
    if (warning) *warning = why;
  }
  cache.used_ = std::make_unique<std::atomic<std::uint8_t>[]>(cache.table_.size());
  return cache;
}

hash_cache::hash_cache(hash_cache&& other) noexcept { *this = std::move(other); }

hash_cache& hash_cache::operator=(hash_cache&& other) noexcept {
  file_ = std::move(other.file_);
  table_ = std::move(other.table_);
  used_ = std::move(other.used_);
  hits_.store(other.hits_.load());
  added_ = std::move(other.added_);
  dirty_ = other.dirty_;
  return *this;
}

const hash_cache::record* hash_cache::locate(const file_key& key, std::uint32_t part) const {
  record probe{};
  probe.device = key.device;
  probe.inode = key.inode;
  probe.part = part;
  const auto it = std::lower_bound(table_.begin(), table_.end(), probe, key_less);
  if (it == table_.end() || it->device != key.device || it->inode != key.inode || it->part != part) return nullptr;
  return &*it;
}

std::optional<sha256_digest> hash_cache::find(const file_key& key, std::uint32_t part) const {
  const record* found = locate(key, part);
  if (found && found->size == key.size && found->mtime_ns == key.mtime_ns) {
    used_[static_cast<std::size_t>(found - table_.data())].store(1, std::memory_order_relaxed);
    hits_.fetch_add(1, std::memory_order_relaxed);
    return found->digest;
  }
  return std::nullopt;
}

void hash_cache::insert(const file_key& key, const sha256_digest& digest, bool racy, std::uint32_t part) {
  if (racy) return;
  record r{key.device, key.inode, key.size, key.mtime_ns, digest, 0, part};
  std::lock_guard lock(mutex_);
  added_.push_back(r);
}

std::size_t hash_cache::inserted() const {
  std::lock_guard lock(mutex_);
  return added_.size();
}

result<void> hash_cache::save(diagnostics& diag) {
  if (file_.empty()) return {};
  const auto day = today();
  std::lock_guard lock(mutex_);
  bool changed = dirty_ || !added_.empty();
  std::vector<record> merged;
  merged.reserve(table_.size() + added_.size());
  for (std::size_t i = 0; i < table_.size(); ++i) {
    record r = table_[i];
    if (used_[i].load(std::memory_order_relaxed) && r.last_used_day != day) {
      r.last_used_day = day;
      changed = true;
    }
    if (day - std::min(day, r.last_used_day) > static_cast<std::uint32_t>(retention.count() / 24)) {
      changed = true;
      continue;
    }
    merged.push_back(r);
  }
  for (auto r : added_) {
    r.last_used_day = day;
    merged.push_back(r);
  }
  if (!changed) return {};
  // New entries replace old ones for the same inode and part (the file was rewritten): keep the last of each
  // key. The pieces of a file that has since shrunk stay until unused for `retention`; their size and mtime
  // no longer match, so they are never found.
  std::stable_sort(merged.begin(), merged.end(), key_less);
  auto last_of_each = [](const record& a, const record& b) {
    return a.device == b.device && a.inode == b.inode && a.part == b.part;
  };
  std::vector<record> unique;
  unique.reserve(merged.size());
  for (std::size_t i = 0; i < merged.size(); ++i) {
    if (i + 1 < merged.size() && last_of_each(merged[i], merged[i + 1])) continue;
    unique.push_back(merged[i]);
  }

  file_header header{};
  std::memcpy(header.magic, magic, sizeof magic);
  header.count = unique.size();
  const std::string_view pieces[] = {
      {reinterpret_cast<const char*>(&header), sizeof header},
      {reinterpret_cast<const char*>(unique.data()), unique.size() * sizeof(record)}};
  diagnostics why;
  if (auto written = net::write_file_atomically(file_, pieces, why); !written) {
    diag.set("the hash cache: " + why.message);
    return written.error();
  }
  table_ = std::move(unique);
  used_ = std::make_unique<std::atomic<std::uint8_t>[]>(table_.size());
  added_.clear();
  dirty_ = false;
  return {};
}

}  // namespace ferry::packaging
