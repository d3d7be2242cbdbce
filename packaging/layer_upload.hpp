#pragma once
// Zips one shard of a layer straight into storage: compression runs on the CPU pool one part at a time
// while earlier parts upload, so memory stays at (parts_in_flight + 1) parts whatever the layer's size,
// and nothing touches the local disk. A shard whose zip fits in one part goes up as a single PUT; a
// failed or cancelled multipart upload is aborted, so storage never holds a partial layer under its key.
// Each part is hashed on the pool as it is made, in order, so the SHA-256 of the stored bytes is known
// when the last part is; once the zip is whole in storage its sidecar (packaging/zip_digest.hpp) follows.
#include "net/offload.hpp"
#include "net/s3_client.hpp"
#include "packaging/layer.hpp"
#include "packaging/zip_digest.hpp"
#include "packaging/zip_writer.hpp"

#include <atomic>

namespace ferry::packaging {

namespace asio = boost::asio;

struct shard_upload {
  std::uint64_t zip_bytes = 0;
  int parts = 0;  // 0: a single PUT
  sha256_digest sha256{};  // of the zip_bytes stored
  std::string etag;        // storage's, for the zip
};

// Stores the shard's zip at `key`, then its sidecar at sidecar_key(key).
asio::awaitable<result<shard_upload>> upload_shard(tracing::action& parent, net::s3_client& s3, net::cpu_pool& pool,
                                                   const layer& l, const shard& s, const std::string& bucket,
                                                   const std::string& key, const zip_options& options,
                                                   std::atomic<std::uint64_t>* bytes_read, diagnostics& diag);

// The same zip bytes into a callback, for `ferry pack --output` and the benchmarks (pack without upload),
// with their SHA-256 and size.
asio::awaitable<result<zip_digest>> zip_shard(net::cpu_pool& pool, const layer& l, const shard& s,
                                              const zip_options& options, std::uint64_t part_size,
                                              std::function<void(std::vector<char>&&)> part_out, diagnostics& diag);

}  // namespace ferry::packaging
