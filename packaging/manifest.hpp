#pragma once
// The manifest: what a node needs to rebuild the Python path: the layers in sys.path order with their
// ids, object keys, sizes and file counts, the Python version and platform they were packed for, and for
// every shard the SHA-256 and size of its zip as stored, which a node checks each download against.
//
// It has two texts. The content text describes what is packed: format, Python, roots, and the layers with
// their shards' ids, keys, file counts and bytes; it follows from the scan alone. The stored body is the
// content text's fields with, in each shard, "sha256" (hex) and "zip_bytes" of its zip after "bytes". The
// manifest is stored at the SHA-256 of its content text, so a warm `ferry pack` finds its key from local
// knowledge alone, and it reads the body there with one GET. The body is written only after every shard it
// names is in storage with its digest known, so finding it proves the whole set is there (a warm pack
// checks just that); a body at that key without the digests (stored by an older ferry) counts as absent
// and is written again. Both texts are deterministic JSON (fixed key order, no whitespace variation).
#include "packaging/discovery.hpp"
#include "packaging/layer.hpp"
#include "packaging/layer_scan.hpp"
#include "packaging/zip_digest.hpp"

#include <map>
#include <span>
#include <string>

namespace ferry::packaging {

struct python_info {
  std::string version;     // "3.11.7"
  std::string platform;    // "cp311-linux_x86_64"
  std::string executable;  // on the workstation, for the record
  // What a node's interpreter must match (agent/run/python_check.hpp); empty: not known (not recorded).
  std::string implementation;  // "cpython"
  std::string machine;         // "x86_64"
  std::string abi;             // sysconfig's SOABI: "cpython-311-x86_64-linux-gnu"
  std::string glibc;           // the newest glibc a shipped wheel's manylinux tags need: "2.28"
  std::vector<std::string> glibc_by;  // the distributions that need it
};

// The interpreter as discovery found it, with the newest glibc its site-packages' wheels need.
python_info python_info_of(const discovery& found);
// "2.17" as {2, 17}; {0, 0} for text that is not MAJOR.MINOR.
std::pair<int, int> glibc_version(std::string_view text);

// The digest of each shard's stored zip, by shard id (within one prefix and codec an id names one key; the
// codec is in every key, so the content text, and with it the manifest's key, differs between codecs).
using shard_digests = std::map<sha256_digest, zip_digest>;

// The content text, whose SHA-256 names the manifest.
std::string manifest_content_json(const python_info& python, std::span<const root_spec> roots,
                                  std::span<const layer> layers, std::string_view prefix, zip_codec codec);

// The stored body. `digests` must hold every shard of `layers`.
std::string manifest_json(const python_info& python, std::span<const root_spec> roots, std::span<const layer> layers,
                          std::string_view prefix, zip_codec codec, const shard_digests& digests);

// "PREFIX/manifests/<hex sha256 of the content text>.json"
std::string manifest_key(std::string_view prefix, std::string_view content_text);

}  // namespace ferry::packaging
