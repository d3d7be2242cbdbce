#include "packaging/storage_lookup.hpp"

#include "net/error.hpp"
#include "tracing/action_types.hpp"

namespace ferry::packaging {

asio::awaitable<result<std::optional<std::string>>> read_small_object(tracing::action& parent, net::s3_client& s3,
                                                                      const std::string& bucket,
                                                                      const std::string& key, diagnostics& diag,
                                                                      std::string* last_modified, bool best_effort,
                                                                      std::string* etag) {
  // No sink: the client collects the body into each attempt's own response, so a retry after a cut
  // never appends to what an earlier attempt read.
  net::s3_call c{.operation = "GetObject", .method = net::http::verb::get, .bucket = bucket, .key = key,
                 .best_effort = best_effort};
  auto got = co_await s3.call(parent, c, diag);
  if (got) {
    if (last_modified) *last_modified = std::string(got->headers["Last-Modified"]);
    if (etag) *etag = std::string(got->headers["ETag"]);
    co_return std::optional<std::string>(std::move(got->body));
  }
  if (got.error() == net::errc::no_such_key) {
    diag.clear();
    co_return std::optional<std::string>{};
  }
  co_return result<std::optional<std::string>>(boost::system::in_place_error, got.error());
}

asio::awaitable<result<std::optional<zip_digest>>> find_stored_digest(tracing::action& parent, net::s3_client& s3,
                                                                      const std::string& bucket,
                                                                      const std::string& zip_key,
                                                                      const sha256_digest& shard_id,
                                                                      zip_digest_cache& cache, diagnostics& diag) {
  using found = std::optional<zip_digest>;
  auto head = co_await s3.head_object(parent, bucket, zip_key, diag);
  if (!head) {
    if (head.error() != net::errc::no_such_key) co_return result<found>(boost::system::in_place_error, head.error());
    diag.clear();
    co_return found{};
  }
  // The key's suffix names the codec: the cache never answers for the other codec's zip of the shard.
  const auto codec = codec_of_key(zip_key).value_or(zip_codec::deflate);
  if (auto known = cache.find(shard_id, codec, head->etag, head->size)) co_return known;
  const auto key = sidecar_key(zip_key);
  auto sidecar = co_await read_small_object(parent, s3, bucket, key, diag);
  if (!sidecar) co_return result<found>(boost::system::in_place_error, sidecar.error());
  if (!*sidecar) {
    parent.log(action_types::packaging::no_sidecar, {{"key", zip_key}});
    co_return found{};
  }
  // A sidecar whose size is not the zip's describes other bytes (a zip stored again, its sidecar not yet).
  const auto digest = parse_sidecar(**sidecar);
  if (!digest || digest->zip_bytes != head->size) {
    parent.log(action_types::packaging::bad_sidecar, {{"key", zip_key}, {"zip_bytes", head->size}});
    co_return found{};
  }
  cache.insert(shard_id, codec, *digest, head->etag);
  co_return digest;
}

}  // namespace ferry::packaging
