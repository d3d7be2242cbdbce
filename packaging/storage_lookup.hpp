#pragma once
// What pack asks storage before it writes: whether a shard's zip is there and what its bytes hash to, and
// small objects read whole (a manifest, a sidecar).
#include "net/s3_client.hpp"
#include "packaging/zip_digest.hpp"
#include "packaging/zip_digest_cache.hpp"

#include <optional>
#include <string>

namespace ferry::packaging {

namespace asio = boost::asio;

// The object's bytes, read whole into memory (up to the HTTP client's cap on collected bodies); nullopt
// when storage has no such object. Each retry starts from an empty body. `last_modified` and `etag`, when
// given, receive the object's Last-Modified and ETag headers (the ETag as sent, quotes and all, for an
// If-Match). A hint the caller can do without is read `best_effort`: one attempt (net::s3_call::best_effort).
asio::awaitable<result<std::optional<std::string>>> read_small_object(tracing::action& parent, net::s3_client& s3,
                                                                      const std::string& bucket,
                                                                      const std::string& key, diagnostics& diag,
                                                                      std::string* last_modified = nullptr,
                                                                      bool best_effort = false,
                                                                      std::string* etag = nullptr);

// The digest of the zip stored at `zip_key` for shard `shard_id`: storage is asked whether the zip is
// there (a HEAD, so that deleting a zip makes the next pack upload it again), and its digest comes from
// `cache` when that recorded this very object, else from the zip's sidecar (then recorded in `cache`).
// nullopt: the shard must be uploaded, because the zip is missing, or it has no sidecar (stored by an
// older ferry) or one that does not describe it.
asio::awaitable<result<std::optional<zip_digest>>> find_stored_digest(tracing::action& parent, net::s3_client& s3,
                                                                      const std::string& bucket,
                                                                      const std::string& zip_key,
                                                                      const sha256_digest& shard_id,
                                                                      zip_digest_cache& cache, diagnostics& diag);

}  // namespace ferry::packaging
