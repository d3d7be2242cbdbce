#pragma once
// `ferry pack` without the command line: scan the roots into layers, find which shards storage already
// holds, zip and upload the rest side by side, then store the manifest. Storage is optional (a dry run,
// or `--output` to a directory): the scan and ids are the same either way.
//
// The manifest needs the SHA-256 of every shard's zip as stored (packaging/manifest.hpp). A shard zipped
// now is hashed as it is made; for one already in storage the digest comes from the local zip digest
// cache, else from the sidecar stored beside the zip; a zip without a sidecar is uploaded again.
#include "net/offload.hpp"
#include "net/s3_client.hpp"
#include "packaging/hash_cache.hpp"
#include "packaging/layer_scan.hpp"
#include "packaging/manifest.hpp"
#include "packaging/zip_digest_cache.hpp"
#include "packaging/zip_writer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>

namespace ferry::packaging {

struct pack_settings {
  scan_options scan;
  zip_options zip;
  std::uint64_t max_layer_size = 4ull << 30;
  bool force = false;     // pack layers over max_layer_size anyway
  bool dry_run = false;   // check storage, upload nothing
  std::string bucket;     // empty: no storage
  std::string prefix;
  std::size_t check_concurrency = 16;   // HEAD requests at once (s3.max_concurrency)
  std::size_t upload_concurrency = 4;   // shards zipping and uploading at once
  std::chrono::seconds stale_upload_age{0};  // sweep_stale_uploads before uploading; 0: no sweep
  // `ferry storage gc` keeps what a manifest newer than its age names, so a pack that finds its manifest
  // (nothing to upload) stores it again once it is this old: a project packed every day stays in use.
  std::chrono::seconds manifest_refresh{24 * 3600};
  // Where the project's import order is kept (packaging/import_order.hpp); empty: none. The layers go to
  // storage in its order, the workspace first.
  std::string import_order_key;
};

// A layer as its shards reach storage, each stored one's zip digest known: what a node needs to fetch it.
struct shipped_shard {
  std::string key;
  // of the zip, lowercase hex: as far as storage can be believed (a quick check only); empty while the
  // shard is not in storage yet (then zip_bytes is 0 too)
  std::string sha256;
  std::uint64_t zip_bytes = 0;
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;  // of the files' content
  std::string id;  // the shard's id from this scan, lowercase hex: what a node checks the entries against
  // A piece shard (layer.hpp): its one entry is bytes [piece_offset, piece_offset + bytes) of a file of
  // file_size bytes. file_size 0: an ordinary shard.
  std::string piece_path;
  std::uint64_t piece_offset = 0;
  std::uint64_t file_size = 0;

  bool stored() const { return !sha256.empty(); }
};
struct shipped_layer {
  std::size_t index = 0;  // among the scan's layers, the manifest's order
  const layer* packed = nullptr;
  std::vector<shipped_shard> shards;  // every shard of the layer, in its order

  bool whole() const {
    return std::all_of(shards.begin(), shards.end(), [](const shipped_shard& s) { return s.stored(); });
  }
};

struct pack_progress {
  // Called on the I/O thread once the scan is done, before anything is uploaded: every layer, and its
  // place in the order of arrival (import_order.hpp).
  std::function<void(const scan_result&, const std::vector<std::size_t>& ranks)> on_scanned;
  // A layer a node waits for (an import of it): its shards not yet started go before all others. I/O
  // thread only.
  void hurry(std::size_t layer_index) { hurried.push_back(layer_index); }
  std::vector<std::size_t> hurried;
  // Called on the I/O thread the moment the first shard of a layer is in storage (uploaded, or found
  // there), once per layer, in no set order; a layer without shards at the start; every layer whole at once
  // when the manifest was there already. Its shards not yet stored have no digest: each of them comes
  // through on_shard_shipped when it is stored. Not in a dry run. Nodes can start on a layer before the pack
  // ends, and on its first shards before its last is zipped.
  std::function<void(const shipped_layer&)> on_layer_shipped;
  // Called on the I/O thread when a shard of a layer already shipped (on_layer_shipped) is in storage:
  // the layer's index, the shard's place in the layer, and the shard.
  std::function<void(std::size_t layer_index, std::size_t shard_index, const shipped_shard&)> on_shard_shipped;
  scan_progress scan;
  std::atomic<std::uint64_t> shards_to_upload{0};
  std::atomic<std::uint64_t> shards_uploaded{0};
  std::atomic<std::uint64_t> bytes_to_zip{0};
  std::atomic<std::uint64_t> bytes_zipped{0};  // content read into zips
  std::atomic<std::uint64_t> bytes_uploaded{0};  // zip bytes stored
};

struct layer_report {
  enum class state { uploaded, present, unknown };  // unknown: no storage, or a dry run that would upload
  const layer* packed = nullptr;
  state status = state::unknown;
  std::uint64_t zip_bytes = 0;  // for uploaded layers
};

struct pack_report {
  scan_result scan;
  std::vector<layer_report> layers;
  // The stored body, digests and all, whether this pack wrote it or found it at manifest_key. Without
  // storage, or in a dry run that would write it, the content text (no digests: nothing is stored).
  std::string manifest_text;
  std::string manifest_key;  // the SHA-256 of the content text names it
  bool manifest_present = false;  // storage already held it, with digests: nothing was checked layer by layer
  shard_digests digests;  // of the shards' stored zips as far as known: all of them once the manifest is stored
  std::uint64_t uploaded_bytes = 0;
  std::size_t uploaded_shards = 0;
  std::vector<std::string> import_order;  // as storage held it before this pack (none: empty)
  std::vector<std::size_t> ranks;         // each layer's place in the order of arrival
};

// How many shards zip-and-upload at once for `threads` compression threads. Twice the threads, and two
// more: while some shards are being sent (the network, and the storage server, take their time) others
// keep every pool thread compressing; a shard's zip waits in memory a part at a time, so the bound on
// memory is this many parts. Never more than storage allows at once.
inline std::size_t upload_workers(std::size_t threads, std::size_t max_concurrency) {
  return std::max<std::size_t>(1, std::min(max_concurrency, 2 * threads + 2));
}

// `cache` and `digests` are consulted and added to, and saved (when they have a file) whatever the outcome:
// what they learned holds either way.
asio::awaitable<result<pack_report>> pack(tracing::action& parent, net::cpu_pool& pool, net::s3_client* s3,
                                          std::span<const root_spec> roots, const python_info& python,
                                          const pack_settings& settings, hash_cache& cache,
                                          zip_digest_cache& digests, pack_progress* progress, diagnostics& diag);

}  // namespace ferry::packaging
