#include "net/sigv4.hpp"

#include "net/uri_encode.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace ferry::net::sigv4 {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

bool iless(std::string_view a, std::string_view b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](char x, char y) { return lower(x) < lower(y); });
}

void append_lower(std::string& out, std::string_view text) {
  for (const char c : text) out.push_back(lower(c));
}

// Hop-by-hop headers and ones that proxies rewrite: signing them would break on the way. The list
// is botocore's, plus Authorization itself.
constexpr std::array<std::string_view, 12> never_signed = {
    "authorization", "connection",        "expect",  "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
    "trailer",       "transfer-encoding", "upgrade", "user-agent", "x-amzn-trace-id",
};

bool is_signed(const header& h) {
  return std::none_of(never_signed.begin(), never_signed.end(),
                      [&](std::string_view name) { return iequals(h.name, name); });
}

// Signed headers by lowercase name; stable, so repeated names keep their values' order.
std::vector<const header*> sorted_signed(std::span<const header> headers) {
  std::vector<const header*> out;
  out.reserve(headers.size());
  for (const auto& h : headers) {
    if (is_signed(h)) out.push_back(&h);
  }
  std::stable_sort(out.begin(), out.end(), [](const header* a, const header* b) { return iless(a->name, b->name); });
  return out;
}

// Trimall: no leading or trailing whitespace, inner runs (line folds too) as one space.
void append_trimmed(std::string& out, std::string_view value) {
  bool pending_space = false;
  bool started = false;
  for (const char c : value) {
    if (is_space(c)) {
      pending_space = started;
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    started = true;
    out.push_back(c);
  }
}

void append_canonical_headers(std::string& out, std::string& names, std::span<const header> headers) {
  const auto sorted = sorted_signed(headers);
  for (std::size_t i = 0; i < sorted.size();) {
    const auto& name = sorted[i]->name;
    if (!names.empty()) names.push_back(';');
    append_lower(names, name);
    append_lower(out, name);
    out.push_back(':');
    append_trimmed(out, sorted[i]->value);
    for (++i; i < sorted.size() && iequals(sorted[i]->name, name); ++i) {
      out.push_back(',');
      append_trimmed(out, sorted[i]->value);
    }
    out.push_back('\n');
  }
}

void append_canonical_uri(std::string& out, std::string_view path, const rules& how) {
  if (path.empty()) path = "/";
  std::string normalized;
  if (how.normalize_path) {
    normalized = normalize_path(path);
    path = normalized;
  }
  if (how.double_encode_path) {
    uri_encode_append(out, path, slash::keep);
  } else {
    out.append(path);
  }
}

// Every name and value encoded into one buffer, then sorted by encoded name and value as views.
void append_canonical_query(std::string& out, std::span<const query_parameter> first,
                            std::span<const query_parameter> second) {
  struct item {
    std::uint32_t begin, middle, end;  // name is [begin, middle), value [middle, end)
  };
  std::string encoded;
  std::vector<item> items;
  items.reserve(first.size() + second.size());
  for (const auto part : {first, second}) {
    for (const auto& [name, value] : part) {
      item it{static_cast<std::uint32_t>(encoded.size()), 0, 0};
      uri_encode_append(encoded, name);
      it.middle = static_cast<std::uint32_t>(encoded.size());
      uri_encode_append(encoded, value);
      it.end = static_cast<std::uint32_t>(encoded.size());
      items.push_back(it);
    }
  }
  const std::string_view text = encoded;
  const auto name = [&](const item& it) { return text.substr(it.begin, it.middle - it.begin); };
  const auto value = [&](const item& it) { return text.substr(it.middle, it.end - it.middle); };
  std::sort(items.begin(), items.end(), [&](const item& a, const item& b) {
    const auto order = name(a).compare(name(b));
    return order != 0 ? order < 0 : value(a) < value(b);
  });
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out.push_back('&');
    out.append(name(items[i]));
    out.push_back('=');
    out.append(value(items[i]));
  }
}

std::string build_canonical_request(const request& req, std::span<const query_parameter> extra_query,
                                    std::string_view payload_hash, const rules& how, std::string& signed_names) {
  std::string out;
  out.reserve(256 + req.path.size() * 2 + req.headers.size() * 64);
  out.append(req.method);
  out.push_back('\n');
  append_canonical_uri(out, req.path, how);
  out.push_back('\n');
  append_canonical_query(out, req.query, extra_query);
  out.push_back('\n');
  append_canonical_headers(out, signed_names, req.headers);
  out.push_back('\n');
  out.append(signed_names);
  out.push_back('\n');
  out.append(payload_hash.empty() ? empty_payload_sha256 : payload_hash);
  return out;
}

void append_query_pair(std::string& url, std::string_view name, std::string_view value) {
  uri_encode_append(url, name);
  url.push_back('=');
  uri_encode_append(url, value);
}

template <class T>
void write_digits(char* out, T value, int width) {
  for (int i = width - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
}

const header& host_header(const request& req) {
  const auto* host = req.find_header("host");
  if (!host) throw std::invalid_argument("SigV4 signs the Host header, and the request has none");
  return *host;
}

}  // namespace

const header* request::find_header(std::string_view name) const {
  const auto it = std::find_if(headers.begin(), headers.end(), [&](const header& h) { return iequals(h.name, name); });
  return it == headers.end() ? nullptr : &*it;
}

void request::set_header(std::string_view name, std::string_view value) {
  const auto it = std::find_if(headers.begin(), headers.end(), [&](const header& h) { return iequals(h.name, name); });
  if (it == headers.end()) {
    headers.push_back({std::string(name), std::string(value)});
  } else {
    it->value.assign(value);
  }
}

void request::remove_header(std::string_view name) {
  std::erase_if(headers, [&](const header& h) { return iequals(h.name, name); });
}

rules generic_service_rules() { return rules{}; }

rules s3_rules() {
  rules how;
  how.normalize_path = false;
  how.double_encode_path = false;
  how.content_sha256_header = true;
  how.unsigned_presigned_payload = true;
  return how;
}

amz_time::amz_time(std::chrono::system_clock::time_point when) {
  using namespace std::chrono;
  const auto seconds_since_epoch = floor<seconds>(when);
  const auto day = floor<days>(seconds_since_epoch);
  const year_month_day ymd{day};
  const hh_mm_ss time{seconds_since_epoch - day};
  char* out = chars_.data();
  write_digits(out, static_cast<int>(ymd.year()), 4);
  write_digits(out + 4, static_cast<unsigned>(ymd.month()), 2);
  write_digits(out + 6, static_cast<unsigned>(ymd.day()), 2);
  out[8] = 'T';
  write_digits(out + 9, time.hours().count(), 2);
  write_digits(out + 11, time.minutes().count(), 2);
  write_digits(out + 13, time.seconds().count(), 2);
  out[15] = 'Z';
}

// botocore's remove_dot_segments: the path's segments without empty ones and ".", each ".."
// taking one back; a trailing '/' survives if anything is left.
std::string normalize_path(std::string_view path) {
  if (path.empty()) return "/";
  std::vector<std::string_view> segments;
  for (std::string_view rest = path; !rest.empty();) {
    const auto slash_at = rest.find('/');
    const auto segment = rest.substr(0, slash_at);
    rest = slash_at == std::string_view::npos ? std::string_view() : rest.substr(slash_at + 1);
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") {
      if (!segments.empty()) segments.pop_back();
      continue;
    }
    segments.push_back(segment);
  }
  std::string out;
  out.reserve(path.size());
  if (path.front() == '/') out.push_back('/');
  for (std::size_t i = 0; i < segments.size(); ++i) {
    if (i) out.push_back('/');
    out.append(segments[i]);
  }
  if (path.back() == '/' && !segments.empty()) out.push_back('/');
  return out;
}

std::string canonical_uri(std::string_view path, const rules& how) {
  std::string out;
  append_canonical_uri(out, path, how);
  return out;
}

std::string canonical_query(std::span<const query_parameter> query) {
  std::string out;
  append_canonical_query(out, query, {});
  return out;
}

std::string signed_header_names(std::span<const header> headers) {
  std::string names;
  const header* previous = nullptr;
  for (const auto* h : sorted_signed(headers)) {
    if (previous && iequals(previous->name, h->name)) continue;
    if (previous) names.push_back(';');
    append_lower(names, h->name);
    previous = h;
  }
  return names;
}

std::string canonical_request(const request& req, const rules& how) {
  std::string names;
  return build_canonical_request(req, {}, req.payload_hash, how, names);
}

std::string credential_scope(std::string_view date, std::string_view region, std::string_view service) {
  std::string out;
  out.reserve(date.size() + region.size() + service.size() + 16);
  out.append(date).append("/").append(region).append("/").append(service).append("/aws4_request");
  return out;
}

std::string string_to_sign(std::string_view timestamp, std::string_view scope, std::string_view canonical_request) {
  std::string out;
  out.reserve(algorithm.size() + timestamp.size() + scope.size() + 67);
  out.append(algorithm).append("\n").append(timestamp).append("\n").append(scope).append("\n");
  append_hex(out, sha256(canonical_request));
  return out;
}

signing_key derive_signing_key(std::string_view secret, std::string_view date, std::string_view region,
                               std::string_view service) {
  std::string first_key;
  first_key.reserve(4 + secret.size());
  first_key.append("AWS4").append(secret);
  auto key = hmac_sha256(first_key, date);
  OPENSSL_cleanse(first_key.data(), first_key.size());
  key = hmac_sha256(as_chars(key), region);
  key = hmac_sha256(as_chars(key), service);
  return hmac_sha256(as_chars(key), "aws4_request");
}

std::string signature(const signing_key& key, std::string_view string_to_sign) {
  return to_hex(hmac_sha256(as_chars(key), string_to_sign));
}

signing_key_cache::signing_key_cache(const signing_key_cache& other) {
  const std::lock_guard lock(other.mutex_);
  entries_ = other.entries_;
  next_ = other.next_;
}

signing_key_cache& signing_key_cache::operator=(const signing_key_cache& other) {
  if (this != &other) {
    const std::scoped_lock lock(mutex_, other.mutex_);
    entries_ = other.entries_;
    next_ = other.next_;
  }
  return *this;
}

signing_key signing_key_cache::get(const secret_string& secret, std::string_view date, std::string_view region,
                                   std::string_view service) const {
  const std::lock_guard lock(mutex_);
  for (const auto& e : entries_) {
    if (e.date == date && e.region == region && e.service == service && e.secret == secret) return e.key;
  }
  entry fresh{secret, std::string(date), std::string(region), std::string(service),
              derive_signing_key(secret.reveal(), date, region, service)};
  const auto key = fresh.key;
  if (entries_.size() < capacity) {
    entries_.push_back(std::move(fresh));
  } else {
    entries_[next_] = std::move(fresh);
    next_ = (next_ + 1) % capacity;
  }
  return key;
}

signer::signer(credentials creds, std::string region, std::string service, rules how)
    : creds_(std::move(creds)), region_(std::move(region)), service_(std::move(service)), rules_(how) {}

signed_request signer::finish(std::string canonical, const amz_time& time, std::string_view scope) const {
  signed_request out;
  out.string_to_sign = string_to_sign(time.timestamp(), scope, canonical);
  out.signature = signature(keys_.get(creds_.secret_access_key, time.date(), region_, service_), out.string_to_sign);
  out.canonical_request = std::move(canonical);
  return out;
}

signed_request signer::sign_headers(request& req, std::chrono::system_clock::time_point now) const {
  host_header(req);
  const amz_time time(now);
  const auto token = creds_.session_token.reveal();
  req.remove_header("Authorization");
  req.set_header("X-Amz-Date", time.timestamp());
  if (!token.empty()) {
    if (rules_.sign_session_token) {
      req.set_header("X-Amz-Security-Token", token);
    } else {
      req.remove_header("X-Amz-Security-Token");
    }
  }
  const std::string_view payload = req.payload_hash.empty() ? empty_payload_sha256 : std::string_view(req.payload_hash);
  if (rules_.content_sha256_header) req.set_header("X-Amz-Content-SHA256", payload);

  const auto scope = credential_scope(time.date(), region_, service_);
  std::string names;
  auto out = finish(build_canonical_request(req, {}, payload, rules_, names), time, scope);
  out.authorization.reserve(algorithm.size() + creds_.access_key_id.size() + scope.size() + names.size() + 120);
  out.authorization.append(algorithm)
      .append(" Credential=")
      .append(creds_.access_key_id)
      .append("/")
      .append(scope)
      .append(", SignedHeaders=")
      .append(names)
      .append(", Signature=")
      .append(out.signature);
  req.headers.push_back({"Authorization", out.authorization});
  if (!token.empty() && !rules_.sign_session_token) req.headers.push_back({"X-Amz-Security-Token", std::string(token)});
  return out;
}

signed_request signer::presign(const request& req, std::string_view scheme, std::chrono::system_clock::time_point now,
                               std::chrono::seconds expires) const {
  if (expires < std::chrono::seconds(1) || expires > std::chrono::days(7)) {
    throw std::invalid_argument("a presigned URL lasts from 1 second to 7 days");
  }
  const auto& host = host_header(req);
  const amz_time time(now);
  const auto scope = credential_scope(time.date(), region_, service_);
  std::vector<query_parameter> auth = {
      {"X-Amz-Algorithm", std::string(algorithm)},
      {"X-Amz-Credential", creds_.access_key_id + "/" + scope},
      {"X-Amz-Date", std::string(time.timestamp())},
      {"X-Amz-Expires", std::to_string(expires.count())},
      {"X-Amz-SignedHeaders", signed_header_names(req.headers)},
  };
  if (!creds_.session_token.empty()) auth.emplace_back("X-Amz-Security-Token", creds_.session_token.reveal());

  const std::string_view payload =
      rules_.unsigned_presigned_payload ? unsigned_payload : std::string_view(req.payload_hash);
  std::string names;
  auto out = finish(build_canonical_request(req, auth, payload, rules_, names), time, scope);

  auto& url = out.url;
  url.reserve(scheme.size() + host.value.size() + req.path.size() + 512);
  url.append(scheme).append("://").append(host.value).append(req.path.empty() ? "/" : req.path).append("?");
  for (const auto& [name, value] : req.query) {
    append_query_pair(url, name, value);
    url.push_back('&');
  }
  for (const auto& [name, value] : auth) {
    append_query_pair(url, name, value);
    url.push_back('&');
  }
  url.append("X-Amz-Signature=").append(out.signature);
  return out;
}

}  // namespace ferry::net::sigv4
