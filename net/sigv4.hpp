#pragma once
// AWS Signature Version 4 without I/O: canonical request, string to sign, signing key, the
// Authorization header and presigned URLs. The clock is a parameter, so signatures are reproducible.
//
// What the signer expects of a request:
// - `path` is the path exactly as it goes on the wire, already URI-encoded by the caller (for S3,
//   locate_object() encodes each key segment once). The signer never decodes it. With generic
//   service rules it normalises the path and encodes it a second time, as those services expect;
//   with S3's rules it signs it as given.
// - `query` holds decoded names and values; the signer encodes them (AWS's rules, '/' too).
// - `headers` must include Host. Names compare case-insensitively; values are signed trimmed with
//   inner whitespace runs (folded lines included) collapsed to one space, and repeated names are
//   joined with ',' in the order given.
// - `payload_hash` is the hex SHA-256 of the body, or unsigned_payload; empty means an empty body.
#include "net/credentials.hpp"
#include "net/digest.hpp"

#include <array>
#include <chrono>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::net::sigv4 {

inline constexpr std::string_view algorithm = "AWS4-HMAC-SHA256";
inline constexpr std::string_view unsigned_payload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view empty_payload_sha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct header {
  std::string name;
  std::string value;
};

using query_parameter = std::pair<std::string, std::string>;

struct request {
  std::string method = "GET";
  std::string path = "/";
  std::vector<query_parameter> query;
  std::vector<header> headers;
  std::string payload_hash;

  const header* find_header(std::string_view name) const;
  // Replaces the first header of that name (keeping its spelling) or appends one.
  void set_header(std::string_view name, std::string_view value);
  void remove_header(std::string_view name);
};

// How a service wants its requests signed.
struct rules {
  bool normalize_path = true;               // drop "." and ".." segments and empty segments
  bool double_encode_path = true;           // encode the (already encoded) path once more
  bool content_sha256_header = false;       // send the payload hash as x-amz-content-sha256
  bool sign_session_token = true;           // false: x-amz-security-token is added after signing
  bool unsigned_presigned_payload = false;  // presigned URLs sign UNSIGNED-PAYLOAD, not the body hash
};

rules generic_service_rules();
rules s3_rules();

// "20150830T123600Z" and its date, "20150830", formatted once without allocating.
class amz_time {
 public:
  explicit amz_time(std::chrono::system_clock::time_point when);
  std::string_view timestamp() const { return {chars_.data(), chars_.size()}; }
  std::string_view date() const { return {chars_.data(), 8}; }

 private:
  std::array<char, 16> chars_;
};

// RFC 3986 dot-segment removal plus collapsing of empty segments, as AWS services expect.
std::string normalize_path(std::string_view path);
std::string canonical_uri(std::string_view path, const rules& how);
std::string canonical_query(std::span<const query_parameter> query);
// The lowercase, sorted, ';'-joined names of the headers that get signed (all but hop-by-hop ones).
std::string signed_header_names(std::span<const header> headers);
std::string canonical_request(const request& req, const rules& how);

std::string credential_scope(std::string_view date, std::string_view region, std::string_view service);
std::string string_to_sign(std::string_view timestamp, std::string_view scope, std::string_view canonical_request);

using signing_key = sha256_digest;

signing_key derive_signing_key(std::string_view secret, std::string_view date, std::string_view region,
                               std::string_view service);
std::string signature(const signing_key& key, std::string_view string_to_sign);

// Signing keys change once a day per region and service, and take four HMACs to derive; this keeps
// the few in use. Safe to share between threads.
class signing_key_cache {
 public:
  signing_key_cache() = default;
  signing_key_cache(const signing_key_cache& other);
  signing_key_cache& operator=(const signing_key_cache& other);

  signing_key get(const secret_string& secret, std::string_view date, std::string_view region,
                  std::string_view service) const;

 private:
  struct entry {
    secret_string secret;
    std::string date;
    std::string region;
    std::string service;
    signing_key key;
  };
  static constexpr std::size_t capacity = 4;

  mutable std::mutex mutex_;
  mutable std::vector<entry> entries_;
  mutable std::size_t next_ = 0;  // the entry to replace when full
};

// What one signature produced. Kept whole because S3's SignatureDoesNotMatch error quotes its own
// canonical request and string to sign, and comparing them is the way to find the difference.
// The canonical request and a presigned URL carry the session token when there is one: redact
// x-amz-security-token before showing either.
struct signed_request {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;
  std::string authorization;  // header signing only
  std::string url;            // presigning only
};

// Signs for one set of credentials, region and service. Safe to share between threads.
class signer {
 public:
  signer(credentials creds, std::string region, std::string service, rules how);

  // Sets x-amz-date (and x-amz-security-token, x-amz-content-sha256 as the rules say), then adds
  // Authorization. A previous Authorization is replaced, so a retry can be signed again.
  signed_request sign_headers(request& req, std::chrono::system_clock::time_point now) const;

  // A URL that performs `req` for whoever holds it. Every header in `req` is signed and must be sent
  // with the URL, so a plain GET carries Host alone. The query is the request's own parameters in
  // the order given, then X-Amz-Algorithm, -Credential, -Date, -Expires, -SignedHeaders,
  // -Security-Token (with a session token) and -Signature, as botocore writes it. `expires` must be
  // 1 s to 7 days.
  signed_request presign(const request& req, std::string_view scheme, std::chrono::system_clock::time_point now,
                         std::chrono::seconds expires) const;

  const credentials& creds() const { return creds_; }
  const std::string& region() const { return region_; }
  const std::string& service() const { return service_; }

 private:
  signed_request finish(std::string canonical, const amz_time& time, std::string_view scope) const;

  credentials creds_;
  std::string region_;
  std::string service_;
  rules rules_;
  signing_key_cache keys_;
};

}  // namespace ferry::net::sigv4
