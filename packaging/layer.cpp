#include "packaging/layer.hpp"

#include "net/digest.hpp"
#include "packaging/entries_id.hpp"

#include <fmt/format.h>

namespace ferry::packaging {

sha256_digest entries_id(std::span<const file_entry> entries) {
  entries_id_stream id;
  for (const auto& e : entries) id.add(e.path, e.mode(), e.digest);
  return id.finish();
}

void seal_layer(layer& l, std::uint64_t shard_size) {
  l.shards.clear();
  l.bytes = 0;
  shard current;
  for (std::size_t i = 0; i < l.files.size(); ++i) {
    const auto size = l.files[i].key.size;
    if (current.count > 0 && current.bytes + size > shard_size) {
      l.shards.push_back(current);
      current = shard{i, 0, 0, {}};
    }
    ++current.count;
    current.bytes += size;
    l.bytes += size;
  }
  if (current.count > 0 || l.shards.empty()) l.shards.push_back(current);
  for (auto& s : l.shards) s.id = entries_id(l.files_of(s));
  l.id = l.shards.size() == 1 ? l.shards.front().id : entries_id(l.files);
}

std::string key_prefix(std::string_view prefix) {
  std::string key(prefix);
  if (!key.empty() && !key.ends_with('/')) key.push_back('/');
  return key;
}

std::string shard_key(std::string_view prefix, const shard& s, zip_codec codec) {
  auto key = key_prefix(prefix);
  key.append("layers/");
  net::append_hex(key, s.id);
  key.append(zip_suffix(codec));
  return key;
}

}  // namespace ferry::packaging
