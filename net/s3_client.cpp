#include "net/s3_client.hpp"

#include "net/aws_chunked.hpp"
#include "net/deadline.hpp"
#include "net/error.hpp"
#include "net/uri_encode.hpp"
#include "tracing/action_types.hpp"

#include <boost/beast/core/detail/base64.hpp>
#include <fmt/format.h>
#include <openssl/evp.h>

#include <cerrno>
#include <charconv>
#include <unistd.h>

namespace ferry::net {
namespace {

origin origin_of(const endpoint& at) { return {at.scheme, at.host, at.port}; }

std::optional<std::chrono::milliseconds> retry_after(const http_response& r) {
  const auto text = r.header("Retry-After");
  long long seconds = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || ec != std::errc{} || seconds < 0) return std::nullopt;
  return std::chrono::milliseconds(std::min<long long>(seconds, 3600) * 1000);
}

object_info info_of(const http_response& r) {
  object_info info;
  const auto length = r.header("Content-Length");
  std::from_chars(length.data(), length.data() + length.size(), info.size);
  info.etag = r.header("ETag");
  info.last_modified = r.header("Last-Modified");
  return info;
}

std::string content_md5(std::string_view body) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(body.data(), body.size(), digest, &size, EVP_md5(), nullptr);
  std::string out(boost::beast::detail::base64::encoded_size(size), '\0');
  out.resize(boost::beast::detail::base64::encode(out.data(), digest, size));
  return out;
}

}  // namespace

std::optional<sigv4::header> write_condition::header() const {
  switch (what) {
    case kind::none: return std::nullopt;
    case kind::absent: return sigv4::header{"if-none-match", "*"};
    case kind::unchanged:
      // S3 sends ETags quoted, and wants them so in If-Match; one given without its quotes gets them.
      return sigv4::header{"if-match", etag.starts_with('"') ? etag : fmt::format("\"{}\"", etag)};
  }
  return std::nullopt;
}

std::string write_condition::text() const {
  const auto h = header();
  if (!h) return {};
  return fmt::format("{}: {}", what == kind::absent ? "If-None-Match" : "If-Match", h->value);
}

s3_client::s3_client(http_client& http, net::cpu_pool& cpu, s3_target target, const config::settings& settings,
                     stall_watch* watch)
    : http_(http), cpu_(cpu), target_(std::move(target)), origin_(origin_of(target_.at)),
      signer_(target_.creds, target_.region, "s3", sigv4::s3_rules()), s3_(settings.s3),
      retry_(settings.net.retry), abort_timeout_(settings.net.abort_timeout), watch_(watch) {}

stall_subject s3_client::subject(const s3_call& c) const {
  auto object = fmt::format("s3://{}/{}", c.bucket, c.key);
  if (c.key.empty()) {
    for (const auto& q : c.query)
      if (q.first == "prefix") object += q.second;
  }
  return {target_.at.origin(), std::string(c.operation), std::move(object)};
}

http_request s3_client::sign(const s3_call& c, const object_location& where) const {
  sigv4::request req;
  req.method = std::string(http::to_string(c.method));
  req.path = where.path;
  req.query = c.query;
  req.headers = c.headers;
  if (auto condition = c.condition.header()) req.headers.push_back(std::move(*condition));
  req.set_header("host", where.host);
  req.payload_hash = c.payload_hash.empty() ? std::string(sigv4::empty_payload_sha256) : c.payload_hash;
  signer_.sign_headers(req, std::chrono::system_clock::now());

  http_request out;
  out.method = c.method;
  out.target = where.path;
  if (!c.query.empty()) out.target += "?" + sigv4::canonical_query(c.query);
  for (const auto& h : req.headers) out.headers.insert(h.name, h.value);
  out.body = c.body;
  return out;
}

error_code s3_client::failure(const s3_call& c, const http_response& response, attempt_info& info) const {
  const auto parsed = find_s3_error(response.body);
  const auto endpoint = target_.at.origin();
  const auto condition = c.condition.text();
  auto ec = s3_failure(static_cast<int>(response.status), parsed,
                       {c.operation, c.bucket, c.key, endpoint, condition}, info.diag);
  if (response.status == 429 || response.status == 503 || (parsed && parsed->code == "SlowDown")) {
    info.retry_after = retry_after(response);
    return make_error_code(errc::throttled);
  }
  if (response.status >= 500) return make_error_code(errc::server_error);
  if (c.method == http::verb::head && response.status == 404) {
    info.diag.set(fmt::format("s3://{}/{} does not exist (HeadObject at {})", c.bucket, c.key, endpoint));
    return make_error_code(errc::no_such_key);
  }
  return ec;
}

asio::awaitable<result<http_response>> s3_client::call_once(const s3_call& c, attempt_info& info) {
  const auto where = locate_object(target_.at, c.bucket, c.key, target_.style);
  const auto request = sign(c, where);
  auto response = co_await http_.send(origin_, request, c.sink, info.diag);
  if (!response) co_return response.error();
  if (response->status / 100 != 2) co_return failure(c, *response, info);
  co_return response;
}

asio::awaitable<result<http_response>> s3_client::call(tracing::action& parent, const s3_call& c, diagnostics& diag) {
  const config::retry_settings once{.max_attempts = 1};
  co_return co_await watched(parent, c, attempts(parent, c, c.best_effort ? once : retry_, diag), diag);
}

asio::awaitable<result<http_response>> s3_client::attempts(tracing::action& parent, const s3_call& c,
                                                           const config::retry_settings& policy, diagnostics& diag) {
  co_return co_await with_retry<http_response>(
      parent, action_types::s3::request, policy,
      [&](tracing::action& act, attempt_info& info) -> asio::awaitable<result<http_response>> {
        act.log(action_types::s3::call,
                {{"operation", c.operation}, {"bucket", c.bucket}, {"key", c.key}, {"bytes", body_size(c.body)}});
        co_return co_await call_once(c, info);
      },
      diag);
}

asio::awaitable<result<object_info>> s3_client::head_object(tracing::action& parent, const std::string& bucket,
                                                            const std::string& key, diagnostics& diag) {
  s3_call c{.operation = "HeadObject", .method = http::verb::head, .bucket = bucket, .key = key};
  auto r = co_await call(parent, c, diag);
  if (!r) co_return r.error();
  co_return info_of(*r);
}

asio::awaitable<result<std::string>> s3_client::put_object(tracing::action& parent, const std::string& bucket,
                                                           const std::string& key, request_body body,
                                                           diagnostics& diag) {
  return put_object(parent, bucket, key, std::move(body), write_condition::none(), diag);
}

asio::awaitable<result<std::string>> s3_client::put_object(tracing::action& parent, const std::string& bucket,
                                                           const std::string& key, request_body body,
                                                           write_condition condition, diagnostics& diag) {
  s3_call c{.operation = "PutObject", .method = http::verb::put, .bucket = bucket, .key = key, .body = body,
            .condition = std::move(condition)};
  if (const auto* file = std::get_if<file_region>(&body); file && origin_.tls()) {
    // Over TLS every byte is already authenticated on the way: stream the file unsigned, like the AWS
    // CLI does for S3 over https. Content-Length still makes a cut-short body fail.
    c.payload_hash = std::string(sigv4::unsigned_payload);
  } else if (file) {
    // Over plain http the file streams with its SHA-256 in a trailer that S3 checks, computed as the
    // bytes go out: no pass over the file before the first byte.
    c.body = aws_chunked_file{*file};
    c.payload_hash = std::string(aws_chunked::content_sha256);
    c.headers = {{"content-encoding", "aws-chunked"},
                 {"x-amz-decoded-content-length", std::to_string(file->length)},
                 {"x-amz-trailer", std::string(aws_chunked::trailer_name)}};
  } else if (const auto* memory = std::get_if<std::span<const char>>(&body)) {
    const std::string_view bytes(memory->data(), memory->size());
    // Small bodies hash in place; large ones on the CPU pool. (No co_await inside a conditional
    // expression: GCC 12 destroys its temporaries too early.)
    if (bytes.size() < (1 << 20))
      c.payload_hash = hex_sha256(bytes);
    else
      c.payload_hash = co_await offload(cpu_, [bytes] { return hex_sha256(bytes); });
  }
  auto r = co_await call(parent, c, diag);
  if (!r) co_return r.error();
  co_return r->header("ETag");
}

asio::awaitable<result<object_info>> s3_client::get_object(tracing::action& parent, const std::string& bucket,
                                                           const std::string& key, const body_sink& sink,
                                                           const std::string& range, diagnostics& diag) {
  s3_call c{.operation = "GetObject", .method = http::verb::get, .bucket = bucket, .key = key, .sink = &sink};
  if (!range.empty()) c.headers.push_back({"range", range});
  auto r = co_await call(parent, c, diag);
  if (!r) co_return r.error();
  auto info = info_of(*r);
  info.size = r->body_bytes;
  co_return info;
}

asio::awaitable<result<list_objects_page>> s3_client::list_page(tracing::action& parent,
                                                                        const std::string& bucket,
                                                                        const std::string& prefix,
                                                                        const std::string& token,
                                                                        diagnostics& diag) {
  s3_call c{.operation = "ListObjectsV2", .method = http::verb::get, .bucket = bucket};
  c.query = {{"list-type", "2"}, {"encoding-type", "url"}};
  if (!prefix.empty()) c.query.emplace_back("prefix", prefix);
  if (!token.empty()) c.query.emplace_back("continuation-token", token);
  auto r = co_await call(parent, c, diag);
  if (!r) co_return r.error();
  co_return parse_list_objects_v2(r->body, diag);
}

asio::awaitable<result<std::vector<s3_object>>> s3_client::list_objects(tracing::action& parent,
                                                                        const std::string& bucket,
                                                                        const std::string& prefix,
                                                                        diagnostics& diag) {
  std::vector<s3_object> all;
  std::string token;
  do {
    auto page = co_await list_page(parent, bucket, prefix, token, diag);
    if (!page) co_return page.error();
    all.insert(all.end(), std::make_move_iterator(page->contents.begin()),
               std::make_move_iterator(page->contents.end()));
    token = page->is_truncated ? page->next_continuation_token : std::string();
  } while (!token.empty());
  co_return all;
}

asio::awaitable<result<void>> s3_client::delete_object(tracing::action& parent, const std::string& bucket,
                                                       const std::string& key, write_condition condition,
                                                       diagnostics& diag) {
  s3_call c{.operation = "DeleteObject", .method = http::verb::delete_, .bucket = bucket, .key = key,
            .condition = std::move(condition)};
  auto r = co_await call(parent, c, diag);
  if (!r) co_return r.error();
  co_return result<void>{};
}

asio::awaitable<result<void>> s3_client::delete_objects(tracing::action& parent, const std::string& bucket,
                                                        const std::vector<std::string>& keys, diagnostics& diag) {
  constexpr std::size_t batch = 1000;  // S3's limit per request
  for (std::size_t at = 0; at < keys.size(); at += batch) {
    const std::span<const std::string> some(keys.data() + at, std::min(batch, keys.size() - at));
    const auto body = build_delete_objects(some);
    s3_call c{.operation = "DeleteObjects", .method = http::verb::post, .bucket = bucket};
    c.query = {{"delete", ""}};
    c.headers = {{"content-md5", content_md5(body)}, {"content-type", "application/xml"}};
    c.body = std::span<const char>(body.data(), body.size());
    c.payload_hash = hex_sha256(body);
    auto r = co_await call(parent, c, diag);
    if (!r) co_return r.error();
    auto parsed = parse_delete_objects(r->body, diag);
    if (!parsed) co_return parsed.error();
    if (!parsed->errors.empty()) {
      const auto& e = parsed->errors.front();
      diag.set(fmt::format("cannot delete s3://{}/{}: {} ({}){}", bucket, e.key, e.message, e.code,
                           parsed->errors.size() > 1 ? fmt::format(", and {} more", parsed->errors.size() - 1) : ""));
      co_return make_error_code(errc::s3_error);
    }
  }
  co_return result<void>{};
}

asio::awaitable<result<std::string>> s3_client::create_multipart_upload(tracing::action& parent,
                                                                        const std::string& bucket,
                                                                        const std::string& key, diagnostics& diag) {
  s3_call c{.operation = "CreateMultipartUpload", .method = http::verb::post, .bucket = bucket, .key = key};
  c.query = {{"uploads", ""}};
  auto r = co_await call(parent, c, diag);
  if (!r) co_return r.error();
  co_return parse_initiate_multipart_upload(r->body, diag);
}

asio::awaitable<result<std::string>> s3_client::upload_part(tracing::action& parent, const std::string& bucket,
                                                            const std::string& key, const std::string& upload_id,
                                                            int part_number, std::span<const char> bytes,
                                                            const std::string& sha256_hex, diagnostics& diag) {
  s3_call c{.operation = "UploadPart", .method = http::verb::put, .bucket = bucket, .key = key, .body = bytes,
            .payload_hash = sha256_hex};
  c.query = {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}};
  auto r = co_await call(parent, c, diag);
  if (!r) co_return r.error();
  co_return r->header("ETag");
}

asio::awaitable<result<std::string>> s3_client::complete_multipart_upload(tracing::action& parent,
                                                                          const std::string& bucket,
                                                                          const std::string& key,
                                                                          const std::string& upload_id,
                                                                          std::vector<completed_part> parts,
                                                                          diagnostics& diag) {
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.part_number < b.part_number; });
  const auto body = build_complete_multipart_upload(parts);
  s3_call c{.operation = "CompleteMultipartUpload", .method = http::verb::post, .bucket = bucket, .key = key};
  c.query = {{"uploadId", upload_id}};
  c.headers = {{"content-type", "application/xml"}};
  c.body = std::span<const char>(body.data(), body.size());
  c.payload_hash = hex_sha256(body);
  auto r = co_await call(parent, c, diag);
  if (!r) co_return r.error();
  auto parsed = parse_complete_multipart_upload(r->body, diag);
  if (!parsed) co_return parsed.error();
  // S3 may send 200 and then an <Error>: the upload did not complete.
  if (parsed->error)
    co_return s3_failure(200, parsed->error, {c.operation, bucket, key, target_.at.origin()}, diag);
  co_return parsed->etag;
}

asio::awaitable<result<void>> s3_client::abort_multipart_upload(tracing::action& parent, const std::string& bucket,
                                                                const std::string& key, const std::string& upload_id,
                                                                diagnostics& diag) {
  s3_call c{.operation = "AbortMultipartUpload", .method = http::verb::delete_, .bucket = bucket, .key = key};
  c.query = {{"uploadId", upload_id}};
  const config::retry_settings once{.max_attempts = 1};
  if (abort_timeout_.count() <= 0) {  // no budget of its own: the request's timeouts bound it
    auto r = co_await attempts(parent, c, once, diag);
    if (!r) co_return r.error();
    co_return result<void>{};
  }
  auto r = co_await with_deadline(attempts(parent, c, once, diag), abort_timeout_);
  if (!r) {
    if (co_await cancelled()) co_return make_error_code(asio::error::operation_aborted);
    diag.set(fmt::format("AbortMultipartUpload of s3://{}/{} at {}: no answer within {} (net.abort_timeout)",
                         bucket, key, target_.at.origin(), config::format_duration(abort_timeout_)));
    co_return make_error_code(errc::timeout);
  }
  if (!*r) co_return r->error();
  co_return result<void>{};
}

asio::awaitable<result<std::vector<multipart_upload>>> s3_client::list_multipart_uploads(tracing::action& parent,
                                                                                         const std::string& bucket,
                                                                                         const std::string& prefix,
                                                                                         diagnostics& diag) {
  std::vector<multipart_upload> all;
  std::string key_marker, id_marker;
  for (;;) {
    s3_call c{.operation = "ListMultipartUploads", .method = http::verb::get, .bucket = bucket};
    c.query = {{"uploads", ""}, {"encoding-type", "url"}};
    if (!prefix.empty()) c.query.emplace_back("prefix", prefix);
    if (!key_marker.empty()) c.query.emplace_back("key-marker", key_marker);
    if (!id_marker.empty()) c.query.emplace_back("upload-id-marker", id_marker);
    auto r = co_await call(parent, c, diag);
    if (!r) co_return r.error();
    auto page = parse_list_multipart_uploads(r->body, diag);
    if (!page) co_return page.error();
    all.insert(all.end(), page->uploads.begin(), page->uploads.end());
    if (!page->is_truncated) break;
    key_marker = page->next_key_marker;
    id_marker = page->next_upload_id_marker;
  }
  co_return all;
}

std::string s3_client::presign_get(const std::string& bucket, const std::string& key, audience who,
                                   std::chrono::seconds expires) const {
  const auto& at = who == audience::nodes ? target_.node_at : target_.at;
  const auto where = locate_object(at, bucket, key, target_.style);
  sigv4::request req;
  req.method = "GET";
  req.path = where.path;
  req.set_header("host", where.host);
  return signer_.presign(req, at.scheme, std::chrono::system_clock::now(), expires).url;
}

std::string s3_client::presign_get(const std::string& bucket, const std::string& key, audience who) const {
  return presign_get(bucket, key, who, std::chrono::duration_cast<std::chrono::seconds>(s3_.presign_expiry));
}

}  // namespace ferry::net
