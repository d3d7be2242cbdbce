#pragma once
// Recomputes a shard's id (packaging/entries_id.hpp) over the entries as they are inflated, on their way
// to the layer's writer: each entry's path and mode from the zip, the SHA-256 of the bytes written. A
// shard is put in place only when this id is the one the workstation computed from its own files (the
// plan's), so the node trusts nothing that storage, or a manifest read back from it, says about a zip:
// a replaced object fails here, with its digest in the manifest edited to match or not. The id does not
// depend on how the zip was compressed.
#include "agent/node/zip_stream.hpp"
#include "net/digest.hpp"
#include "packaging/entries_id.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace ferry::agent::node {

class id_check final : public entry_sink {
 public:
  explicit id_check(entry_sink& next) : next_(next) {}
  // A piece shard's one entry is bytes from `piece_offset` on of its file: its id line says so.
  id_check(entry_sink& next, std::optional<std::uint64_t> piece_offset) : next_(next), piece_offset_(piece_offset) {}

  result<void> begin(const zip_entry& entry, diagnostics& diag) override;
  result<void> data(std::string_view bytes, diagnostics& diag) override;
  result<void> end(diagnostics& diag) override;

  // The id of every entry that went through, in order. Once, after the last.
  std::string finish_hex();

 private:
  entry_sink& next_;
  packaging::entries_id_stream id_;
  net::sha256_stream content_;
  std::string name_;
  std::uint32_t mode_ = 0;
  std::optional<std::uint64_t> piece_offset_;
  std::uint64_t length_ = 0;  // of the entry so far
};

}  // namespace ferry::agent::node
