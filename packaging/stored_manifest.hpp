#pragma once
// The stored manifest read back (packaging/manifest.hpp writes it): what a node, or anything else that
// fetches a manifest, needs to download and check each shard's zip. The parser takes only a complete
// body: a text without the digest of every shard's zip (the content text alone, or a manifest stored by
// an older ferry) is refused, because nothing downloaded by it could be verified.
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::packaging {

struct stored_shard {
  std::string id;  // 64 lowercase hex: the SHA-256 of its entries
  std::string key;  // the object key of its zip
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;      // of the files' content
  std::string sha256;           // 64 lowercase hex: of the zip's bytes, to check a download against
  std::uint64_t zip_bytes = 0;  // the zip's size
};

struct stored_layer {
  std::string name;
  std::uint64_t root = 0;  // the index of the root it extracts into
  std::string id;          // 64 lowercase hex
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
  std::vector<stored_shard> shards;
};

struct stored_root {
  std::uint64_t index = 0;
  std::string kind;  // "workspace", "site-packages" or "path"
  std::string path;  // on the workstation, as bytes
};

struct stored_manifest {
  std::string python_version;   // "3.11.7"
  std::string python_platform;  // "cp311-linux_x86_64"
  std::vector<stored_root> roots;    // in sys.path order
  std::vector<stored_layer> layers;  // in the order stored
};

// errc::bad_manifest, with the diagnostics naming the field at fault, for anything but a complete body.
result<stored_manifest> parse_manifest(std::string_view text, diagnostics& diag);

}  // namespace ferry::packaging
