#pragma once
// The S3 client: every request signed with SigV4 (S3's rules, the payload hash signed so that S3
// rejects bytes that changed on the way), retried through net/retry, and traced. Failures come back
// as net::errc with a message that names the bucket, key and operation.
#include "config/settings.hpp"
#include "net/http_client.hpp"
#include "net/offload.hpp"
#include "net/retry.hpp"
#include "net/s3_target.hpp"
#include "net/s3_xml.hpp"
#include "net/sigv4.hpp"
#include "net/stall_watch.hpp"
#include "tracing/action.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ferry::net {

struct object_info {
  std::uint64_t size = 0;
  std::string etag;
  std::string last_modified;
};

// What a PUT requires of the object it would replace: S3's conditional writes, for small records that
// several writers update by reading one, changing it and writing it back only if nobody wrote in between.
struct write_condition {
  enum class kind {
    none,       // write whatever is there
    absent,     // If-None-Match: *: create only, when no object has the key
    unchanged,  // If-Match: "<etag>": replace only the version with this ETag
  };
  kind what = kind::none;
  std::string etag;  // unchanged: the ETag as S3 sent it with the object (quotes may be left off)

  static write_condition none() { return {}; }
  static write_condition create_only() { return {kind::absent, {}}; }
  static write_condition if_match(std::string etag) { return {kind::unchanged, std::move(etag)}; }

  // The request header that carries it (signed like the others); nullopt for none.
  std::optional<sigv4::header> header() const;
  // The same for messages, e.g. `If-Match: "9b2cf5..."`; empty for none.
  std::string text() const;
};

// One S3 request before signing.
struct s3_call {
  std::string_view operation;  // "PutObject": for messages and traces
  http::verb method = http::verb::get;
  std::string bucket;
  std::string key;
  std::vector<sigv4::query_parameter> query;
  std::vector<sigv4::header> headers;
  request_body body;
  std::string payload_hash;  // hex SHA-256 of the body; empty: an empty body
  const body_sink* sink = nullptr;
  write_condition condition;  // sent as its header; named in the message when it does not hold
  // One attempt only: a hint the caller can do without (the import order) is not worth retrying.
  bool best_effort = false;
};

class s3_client {
 public:
  // `watch`, when there is one, watches every call but the aborts (net/stall_watch.hpp).
  s3_client(http_client& http, net::cpu_pool& cpu, s3_target target, const config::settings& settings,
            stall_watch* watch = nullptr);

  asio::awaitable<result<object_info>> head_object(tracing::action& parent, const std::string& bucket,
                                                   const std::string& key, diagnostics& diag);
  // A single PUT of a body in memory (its SHA-256 signed) or of a file region (streamed with aws-chunked
  // encoding and a SHA-256 trailer that S3 verifies). Returns the new object's ETag, as S3 sends it.
  asio::awaitable<result<std::string>> put_object(tracing::action& parent, const std::string& bucket,
                                                  const std::string& key, request_body body, diagnostics& diag);
  // The same PUT, made only if `condition` holds when S3 applies it (S3 conditional writes). When it does
  // not (HTTP 412, or 409 ConditionalRequestConflict for a conditional write that raced another), the
  // object is left as it was and the error is errc::precondition_failed, after one attempt: the caller
  // reads the object again (get_object gives its ETag in object_info::etag) and decides. If-Match on a
  // key that has no object fails with errc::no_such_key. Connection failures and server errors are
  // retried as for any PUT: a retry after a write that landed but whose answer was lost then fails its
  // own condition, so a caller that gets precondition_failed must read before concluding it lost.
  asio::awaitable<result<std::string>> put_object(tracing::action& parent, const std::string& bucket,
                                                  const std::string& key, request_body body,
                                                  write_condition condition, diagnostics& diag);
  // Streams the object (or `range`, e.g. "bytes=0-99") to `sink`.
  asio::awaitable<result<object_info>> get_object(tracing::action& parent, const std::string& bucket,
                                                  const std::string& key, const body_sink& sink,
                                                  const std::string& range, diagnostics& diag);
  // All keys under `prefix`, page after page.
  asio::awaitable<result<std::vector<s3_object>>> list_objects(tracing::action& parent, const std::string& bucket,
                                                               const std::string& prefix, diagnostics& diag);
  asio::awaitable<result<list_objects_page>> list_page(tracing::action& parent, const std::string& bucket,
                                                               const std::string& prefix, const std::string& token,
                                                               diagnostics& diag);
  // Deletes up to any number of keys, 1000 per request; a key that could not be deleted is an error.
  // One object deleted only if `condition` holds (If-Match: "<etag>"): errc::precondition_failed when the
  // object changed since it was read, no_such_key when it is gone; the same retries as put_object's
  // conditional form, so the same caution: a precondition_failed may follow our own delete that landed.
  asio::awaitable<result<void>> delete_object(tracing::action& parent, const std::string& bucket,
                                              const std::string& key, write_condition condition,
                                              diagnostics& diag);
  asio::awaitable<result<void>> delete_objects(tracing::action& parent, const std::string& bucket,
                                               const std::vector<std::string>& keys, diagnostics& diag);

  asio::awaitable<result<std::string>> create_multipart_upload(tracing::action& parent, const std::string& bucket,
                                                               const std::string& key, diagnostics& diag);
  asio::awaitable<result<std::string>> upload_part(tracing::action& parent, const std::string& bucket,
                                                   const std::string& key, const std::string& upload_id,
                                                   int part_number, std::span<const char> bytes,
                                                   const std::string& sha256_hex, diagnostics& diag);
  asio::awaitable<result<std::string>> complete_multipart_upload(tracing::action& parent, const std::string& bucket,
                                                                 const std::string& key, const std::string& upload_id,
                                                                 std::vector<completed_part> parts,
                                                                 diagnostics& diag);
  // An abort runs because something failed, a stall included: it is not watched, and it has one attempt
  // within net.abort_timeout.
  asio::awaitable<result<void>> abort_multipart_upload(tracing::action& parent, const std::string& bucket,
                                                       const std::string& key, const std::string& upload_id,
                                                       diagnostics& diag);
  asio::awaitable<result<std::vector<multipart_upload>>> list_multipart_uploads(tracing::action& parent,
                                                                                const std::string& bucket,
                                                                                const std::string& prefix,
                                                                                diagnostics& diag);

  // Who will use a presigned URL: it must name the endpoint as they reach it (storage.node_endpoint).
  enum class audience { workstation, nodes };

  // A URL for a GET of the object that works for `expires` (default: s3.presign_expiry).
  std::string presign_get(const std::string& bucket, const std::string& key, audience who,
                          std::chrono::seconds expires) const;
  std::string presign_get(const std::string& bucket, const std::string& key, audience who = audience::nodes) const;

  // Sends one call with retries (one attempt when best_effort), under the stall watch; each attempt is a
  // child action of `parent`.
  asio::awaitable<result<http_response>> call(tracing::action& parent, const s3_call& c, diagnostics& diag);

  // Runs `op`, every attempt at `c`, under the stall watch (without one: as it is). For callers that make
  // their own attempts with call_once.
  template <class T>
  asio::awaitable<result<T>> watched(tracing::action& parent, const s3_call& c, asio::awaitable<result<T>> op,
                                     diagnostics& diag) {
    if (!watch_) return op;
    return watch_->guard(parent, subject(c), std::move(op), diag);
  }

  // One attempt of a call, for callers that change the request between attempts (resumed downloads).
  asio::awaitable<result<http_response>> call_once(const s3_call& c, attempt_info& info);

  const s3_target& target() const { return target_; }
  const config::retry_settings& retry() const { return retry_; }
  const config::s3_settings& settings() const { return s3_; }
  net::cpu_pool& cpu() { return cpu_; }

 private:
  http_request sign(const s3_call& c, const object_location& where) const;
  error_code failure(const s3_call& c, const http_response& response, attempt_info& info) const;
  stall_subject subject(const s3_call& c) const;
  asio::awaitable<result<http_response>> attempts(tracing::action& parent, const s3_call& c,
                                                  const config::retry_settings& policy, diagnostics& diag);

  http_client& http_;
  net::cpu_pool& cpu_;
  s3_target target_;
  origin origin_;
  sigv4::signer signer_;
  config::s3_settings s3_;
  config::retry_settings retry_;
  std::chrono::milliseconds abort_timeout_;
  stall_watch* watch_;
};


}  // namespace ferry::net
