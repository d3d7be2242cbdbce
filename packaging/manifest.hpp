#pragma once
// The manifest: what a node needs to rebuild the Python path: the layers in sys.path order with their
// ids, object keys, sizes and file counts, and the Python version and platform they were packed for.
// It is stored under the SHA-256 of its own bytes and written only after every layer it names is in
// storage, so finding it proves the whole set is there (a warm `ferry pack` checks just that).
#include "packaging/layer.hpp"
#include "packaging/layer_scan.hpp"

#include <span>
#include <string>

namespace ferry::packaging {

struct python_info {
  std::string version;     // "3.11.7"
  std::string platform;    // "cp311-linux_x86_64"
  std::string executable;  // on the workstation, for the record
};

// Deterministic JSON text (fixed key order, no whitespace variation).
std::string manifest_json(const python_info& python, std::span<const root_spec> roots, std::span<const layer> layers,
                          std::string_view prefix);

// "PREFIX/manifests/<hex sha256 of the text>.json"
std::string manifest_key(std::string_view prefix, std::string_view manifest_text);

}  // namespace ferry::packaging
