#pragma once
// The SHA-256 of a shard's zip as stored, and the small object that records it beside the zip. A shard's
// id names its entries, not its bytes (the same entries zipped at another compression level, or by another
// ferry, are other bytes under the same key), so a node that downloads a zip learns what to check it
// against from the manifest, and the manifest learns it from whoever stored the zip: ferry hashes each part
// as it makes it, then writes `<zip key>.sha256` holding "<64 hex> <zip bytes>\n". That sidecar is written
// only after the zip is whole in storage, so it never vouches for a zip that is missing.
#include "packaging/file_entry.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::packaging {

struct zip_digest {
  sha256_digest sha256{};
  std::uint64_t zip_bytes = 0;

  friend bool operator==(const zip_digest&, const zip_digest&) = default;
};

// "<zip key>.sha256"
std::string sidecar_key(std::string_view zip_key);

// "<64 lowercase hex> <zip bytes>\n"
std::string sidecar_text(const zip_digest& digest);
// The digest a sidecar holds; nullopt when the text is not exactly that form.
std::optional<zip_digest> parse_sidecar(std::string_view text);

// 64 lowercase hex digits as a digest; nullopt for anything else.
std::optional<sha256_digest> parse_hex_digest(std::string_view hex);

}  // namespace ferry::packaging
