#include "packaging/layer.hpp"

#include "net/digest.hpp"
#include "packaging/entries_id.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ferry::packaging {

sha256_digest entries_id(std::span<const file_entry> entries) {
  entries_id_stream id;
  for (const auto& e : entries) {
    if (e.is_piece()) {
      id.add_piece(e.path, e.mode(), e.piece_offset, e.piece_length, e.digest);
    } else {
      id.add(e.path, e.mode(), e.digest);
    }
  }
  return id.finish();
}

std::uint64_t piece_count(std::uint64_t size) { return size <= piece_size ? 0 : (size + piece_size - 1) / piece_size; }

sha256_digest piece_root(std::span<const sha256_digest> pieces) {
  net::sha256_stream root;
  root.update(fmt::format("ferry-pieces-v1 {}\n", piece_size));
  for (const auto& p : pieces) root.update(p.data(), p.size());
  return root.finish();
}

namespace {

// A piece shard per piece of `f`, its entries appended to l.pieces.
void cut_into_pieces(layer& l, const file_entry& f) {
  for (std::size_t k = 0; k < f.piece_digests.size(); ++k) {
    file_entry piece = f;
    piece.piece_digests.clear();
    piece.piece_offset = k * piece_size;
    piece.piece_length = std::min(piece_size, f.key.size - piece.piece_offset);
    piece.digest = f.piece_digests[k];
    l.shards.push_back(shard{l.pieces.size(), 1, piece.piece_length, {}, true});
    l.pieces.push_back(std::move(piece));
  }
}

}  // namespace

void seal_layer(layer& l, std::uint64_t shard_size) {
  l.shards.clear();
  l.pieces.clear();
  l.bytes = 0;
  shard current;
  for (std::size_t i = 0; i < l.files.size(); ++i) {
    const auto& f = l.files[i];
    const auto size = f.key.size;
    l.bytes += size;
    if (!f.piece_digests.empty()) {
      // A cut file's pieces are shards of their own; the files around it go on in the next shard.
      if (current.count > 0) l.shards.push_back(current);
      cut_into_pieces(l, f);
      current = shard{i + 1, 0, 0, {}};
      continue;
    }
    if (current.count > 0 && current.bytes + size > shard_size) {
      l.shards.push_back(current);
      current = shard{i, 0, 0, {}};
    }
    ++current.count;
    current.bytes += size;
  }
  if (current.count > 0 || l.shards.empty()) l.shards.push_back(current);
  for (auto& s : l.shards) s.id = entries_id(l.files_of(s));
  l.id = l.shards.size() == 1 && !l.shards.front().piece ? l.shards.front().id : entries_id(l.files);
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
