#include "agent/doctor/bucket_checks.hpp"

#include "net/error.hpp"
#include "net/s3_xml.hpp"

#include <fmt/format.h>

#include <random>

namespace ferry::agent::doctor {
namespace {

namespace asio = boost::asio;

constexpr std::string_view list_check = "storage.list";
constexpr std::string_view write_check = "storage.write";

// The prefix as ferry's keys start: "" or ending in '/' (packaging's rule for PREFIX/layers/...).
std::string key_prefix(std::string key) {
  if (!key.empty() && !key.ends_with('/')) key.push_back('/');
  return key;
}


// What to change when the endpoint is not storage: the setting that named it.
std::string endpoint_setting_fix(const storage_link& link) {
  const auto& setting = link.place().setting;
  if (setting.empty())
    return "set storage.endpoint (or AWS_ENDPOINT_URL) to your S3 storage's endpoint";
  return fmt::format("point {} at your S3 storage's endpoint (not a web page, proxy or portal)", setting);
}

// An answer that does not come from S3 (a captive portal, a web server, a proxy's error page): naming an S3
// meaning for it would send the user after the wrong fix.
check_result not_s3(std::string_view name, const net::http_response& r, const storage_link& link,
                    std::string_view why) {
  auto type = r.header("Content-Type");
  if (type.empty()) type = "no Content-Type";
  return failed(std::string(name),
                fmt::format("the endpoint {} answered HTTP {} but not as S3 ({}, {} bytes: {})",
                            link.place().at.origin(), r.status, type, r.body.size(), why),
                endpoint_setting_fix(link), make_error_code(net::errc::bad_response));
}

// What storage's refusal of `c` means, and what to do about it.
check_result refused(std::string_view name, const storage_call& c, const net::http_response& r,
                     const storage_link& link, const bucket_target& t) {
  const auto parsed = net::find_s3_error(r.body);
  diagnostics d;
  const auto endpoint = link.place().at.origin();
  const auto ec = net::s3_failure(static_cast<int>(r.status), parsed, {c.operation, c.bucket, c.key, endpoint}, d);
  const std::string code = parsed ? parsed->code : "";
  const auto& bucket = t.url.bucket;
  const auto n = std::string(name);
  // Only S3's own error code gives a status its S3 meaning (a 404 NoSuchBucket, a 503 SlowDown).
  if (!parsed)
    return failed(n,
                  fmt::format("{} got HTTP {} without an S3 error code from {}: is this an S3 endpoint?", c.operation,
                              r.status, endpoint),
                  endpoint_setting_fix(link), ec);
  if (code == "NoSuchBucket")
    return failed(n, fmt::format("bucket '{}' does not exist at {} (NoSuchBucket)", bucket, endpoint),
                  fmt::format("create it (`aws s3 mb s3://{}`), or set storage.url (FERRY_STORAGE_URL) to a bucket "
                              "that exists",
                              bucket),
                  ec);
  if (code == "SignatureDoesNotMatch")
    return failed(n,
                  fmt::format("storage refused {} on s3://{}: the request signature does not match "
                              "(SignatureDoesNotMatch): the secret access key is not the one of access key {}",
                              c.operation, bucket, t.key_id),
                  fmt::format("set the secret access key that belongs to {} where it was found ({}: "
                              "AWS_SECRET_ACCESS_KEY or the profile's aws_secret_access_key)",
                              t.key_id, t.creds_source),
                  ec);
  if (code == "InvalidAccessKeyId")
    return failed(n,
                  fmt::format("storage does not know access key {} (InvalidAccessKeyId) at {}", t.key_id, endpoint),
                  fmt::format("use an access key id of this storage's account where it was found ({}: "
                              "AWS_ACCESS_KEY_ID or the profile's aws_access_key_id)",
                              t.creds_source),
                  ec);
  if (code == "RequestTimeTooSkewed")
    return failed(n, d.message, "set this machine's clock right (see the clock check), e.g. `timedatectl set-ntp true`",
                  ec);
  if (code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired")
    return failed(n, d.message, "refresh the credentials and their session token (AWS_SESSION_TOKEN or the profile)",
                  ec);
  if (code == "AccessDenied" || code == "AllAccessDisabled" || r.status == 403)
    return failed(n, d.message,
                  fmt::format("grant access key {} s3:ListBucket on arn:aws:s3:::{} and s3:PutObject, s3:GetObject "
                              "and s3:DeleteObject on arn:aws:s3:::{}/{}*",
                              t.key_id, bucket, bucket, key_prefix(t.url.key)),
                  ec);
  if (code == "PermanentRedirect" || code == "TemporaryRedirect" || code == "AuthorizationHeaderMalformed" ||
      code == "IllegalLocationConstraintException")
    return failed(n, d.message, "set storage.region (or AWS_REGION) to the bucket's region, or storage.endpoint to "
                                "the endpoint it names", ec);
  return failed(n, d.message, "check storage.url, the endpoint and the region against what the error names", ec);
}

// A request that got no answer: the endpoint check says more.
check_result unanswered(std::string_view name, const error_code& ec, const diagnostics& diag) {
  if (is_interruption(ec)) return interrupted(std::string(name), describe(ec, diag), ec);
  return failed(std::string(name), describe(ec, diag),
                "check that storage answers (the endpoint check), or raise net.read_timeout if it is only slow", ec);
}

bool ok(const net::http_response& r) { return r.status / 100 == 2; }

// Bytes of the text at `pos` that continue a UTF-8 sequence (10xxxxxx): no cut falls between them.
bool continues(std::string_view text, std::size_t pos) {
  return pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80;
}

}  // namespace

std::string mask_key_id(std::string_view id) {
  const std::size_t shown = std::min<std::size_t>(4, id.size() / 4);
  // Cut on character boundaries: a key id with multi-byte characters (a typo, a paste) stays valid UTF-8.
  std::size_t head = shown, tail = id.size() - shown;
  while (head > 0 && continues(id, head)) --head;
  while (tail < id.size() && continues(id, tail)) ++tail;
  std::string out;
  for (const char c : fmt::format("{}…{}", id.substr(0, head), id.substr(tail))) {
    // Control characters would move the terminal's cursor or break a line of the report.
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else
      out.push_back(c);
  }
  return out;
}

asio::awaitable<check_result> check_list(tracing::action& parent, storage_link& link, const bucket_target& t) {
  auto act = open_check(parent, list_check);
  storage_call c{.operation = "ListObjectsV2", .method = net::http::verb::get, .bucket = t.url.bucket};
  c.query = {{"list-type", "2"}, {"max-keys", "1"}};
  const auto prefix = key_prefix(t.url.key);
  if (!prefix.empty()) c.query.emplace_back("prefix", prefix);
  diagnostics diag;
  auto r = co_await link.send(act, c, diag);
  if (!r) co_return close_check(act, unanswered(list_check, r.error(), diag));
  if (!ok(*r)) co_return close_check(act, refused(list_check, c, *r, link, t));
  diagnostics xml;
  if (auto page = net::parse_list_objects_v2(r->body, xml); !page)
    co_return close_check(act, not_s3(list_check, *r, link, "no ListBucketResult"));
  co_return close_check(act, passed(std::string(list_check),
                                    fmt::format("s3://{}/{} can be listed (access key {})", t.url.bucket, prefix,
                                                t.key_id)));
}

std::string probe_key(const config::s3_url& url) {
  std::random_device rd;
  const auto bits = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{}.ferry-doctor-{:016x}", key_prefix(url.key), bits);
}

// A PUT that may have landed and was not deleted leaves the probe behind: the report names it, with the
// command that removes it (an AWS CLI one: ferry has no command for a single key).
check_result left_behind(check_result out, std::string_view bucket, std::string_view key, std::string_view how) {
  const auto where = fmt::format("s3://{}/{}", bucket, key);
  out.detail = fmt::format("{} {}: {}", where, how, out.detail);
  out.fix += fmt::format("; then remove it: `aws s3 rm {}`", where);
  return out;
}

asio::awaitable<check_result> check_write(tracing::action& parent, storage_link& link, const bucket_target& t,
                                          std::string key) {
  auto act = open_check(parent, write_check);
  storage_call put{.operation = "PutObject", .method = net::http::verb::put, .bucket = t.url.bucket,
                   .key = std::move(key)};
  put.body = "written by `ferry doctor`, which deletes it again\n";
  diagnostics diag;
  auto r = co_await link.send(act, put, diag);
  constexpr std::string_view maybe_written = "may have been written";
  if (!r)
    co_return close_check(act,
                          left_behind(unanswered(write_check, r.error(), diag), put.bucket, put.key, maybe_written));
  if (!ok(*r)) co_return close_check(act, refused(write_check, put, *r, link, t));
  // S3 answers every PUT with the object's ETag; a 2xx without one did not come from S3.
  if (r->header("ETag").empty())
    co_return close_check(act,
                          left_behind(not_s3(write_check, *r, link, "no ETag"), put.bucket, put.key, maybe_written));

  const auto where = fmt::format("s3://{}/{}", put.bucket, put.key);
  storage_call del{.operation = "DeleteObject", .method = net::http::verb::delete_, .bucket = put.bucket,
                   .key = put.key};
  auto gone = co_await link.send(act, del, diag);
  check_result out;
  if (!gone)
    out = unanswered(write_check, gone.error(), diag);
  else if (!ok(*gone))
    out = refused(write_check, del, *gone, link, t);
  if (out.status == check_status::failed)
    co_return close_check(act, left_behind(std::move(out), put.bucket, put.key, "was written but not deleted"));
  co_return close_check(act, passed(std::string(write_check),
                                    fmt::format("wrote and deleted {} ({} bytes)", where, put.body.size())));
}

}  // namespace ferry::agent::doctor
