#include "packaging/zip_digest_cache.hpp"

#include "net/atomic_file.hpp"
#include "net/digest.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace ferry::packaging {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view format_line = "ferry-zip-digests-v1";
constexpr std::string_view zstd_mark = ".zstd";  // after a zstd zip's shard id

std::uint32_t today() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<std::uint32_t>(std::chrono::duration_cast<std::chrono::hours>(now).count() / 24);
}

// S3 sends an ETag in quotes in headers and in XML alike, but not every store does: compare the inside.
std::string_view unquoted(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') return etag.substr(1, etag.size() - 2);
  return etag;
}

// The next space-separated field of `line`, consumed.
std::string_view next_field(std::string_view& line) {
  const auto space = line.find(' ');
  const auto field = line.substr(0, space);
  line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  return field;
}

template <class Number>
bool parse_number(std::string_view text, Number& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc{} && end == text.data() + text.size();
}

}  // namespace

zip_digest_cache zip_digest_cache::load(const fs::path& file, std::string* warning) {
  zip_digest_cache cache;
  cache.file_ = file;
  std::ifstream in(file, std::ios::binary);
  if (!in) return cache;
  std::string line;
  bool ok = std::getline(in, line) && line == format_line;
  std::map<std::pair<sha256_digest, zip_codec>, entry> entries;
  while (ok && std::getline(in, line)) {
    // "<shard id> <zip sha256> <zip bytes> <last used day> <etag>": the ETag last, as the rest of the line.
    std::string_view rest(line);
    auto id_field = next_field(rest);
    const auto codec = id_field.ends_with(zstd_mark) ? zip_codec::zstd : zip_codec::deflate;
    if (codec == zip_codec::zstd) id_field.remove_suffix(zstd_mark.size());
    const auto id = parse_hex_digest(id_field);
    const auto sha = parse_hex_digest(next_field(rest));
    entry e;
    ok = id && sha && parse_number(next_field(rest), e.digest.zip_bytes) &&
         parse_number(next_field(rest), e.last_used_day);
    if (!ok) break;
    e.digest.sha256 = *sha;
    e.etag = std::string(rest);
    ok = entries.emplace(std::pair(*id, codec), std::move(e)).second;
  }
  if (!ok || in.bad()) {
    cache.dirty_ = true;
    if (warning) *warning = fmt::format("{}: not a ferry zip digest cache or damaged; it will be rebuilt", file.string());
    return cache;
  }
  cache.entries_ = std::move(entries);
  return cache;
}

std::optional<zip_digest> zip_digest_cache::find(const sha256_digest& shard_id, zip_codec codec,
                                                 std::string_view etag, std::uint64_t size) {
  const auto it = entries_.find(std::pair(shard_id, codec));
  if (it == entries_.end() || it->second.digest.zip_bytes != size) return std::nullopt;
  if (!etag.empty() && unquoted(etag) != it->second.etag) return std::nullopt;
  if (const auto day = today(); it->second.last_used_day != day) {
    it->second.last_used_day = day;
    dirty_ = true;
  }
  return it->second.digest;
}

void zip_digest_cache::insert(const sha256_digest& shard_id, zip_codec codec, const zip_digest& digest,
                              std::string_view etag) {
  entries_[std::pair(shard_id, codec)] = entry{digest, std::string(unquoted(etag)), today()};
  dirty_ = true;
}

result<void> zip_digest_cache::save(diagnostics& diag) {
  if (file_.empty()) return {};
  const auto day = today();
  const auto kept_days = static_cast<std::uint32_t>(retention.count() / 24);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (day - std::min(day, it->second.last_used_day) > kept_days) {
      it = entries_.erase(it);
      dirty_ = true;
    } else {
      ++it;
    }
  }
  if (!dirty_) return {};
  std::string text(format_line);
  text.push_back('\n');
  for (const auto& [id, e] : entries_) {
    // An ETag holds no newline (it came from a header), so the line format stays unambiguous.
    fmt::format_to(std::back_inserter(text), "{}{} {} {} {} {}\n", net::to_hex(id.first),
                   id.second == zip_codec::zstd ? zstd_mark : std::string_view(), net::to_hex(e.digest.sha256),
                   e.digest.zip_bytes, e.last_used_day, e.etag);
  }
  diagnostics why;
  if (auto written = net::write_file_atomically(file_, text, why); !written) {
    diag.set("the zip digest cache: " + why.message);
    return written.error();
  }
  dirty_ = false;
  return {};
}

}  // namespace ferry::packaging
