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

// A key no other doctor (nor anything of ferry's) uses: .ferry-doctor-<16 hex digits>.
std::string probe_key(const net::s3_url& url) {
  std::random_device rd;
  const auto bits = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{}.ferry-doctor-{:016x}", key_prefix(url.key), bits);
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
  if (code == "NoSuchBucket" || (!parsed && r.status == 404 && c.key.empty()))
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
  return failed(std::string(name), describe(ec, diag),
                "check that storage answers (the endpoint check), or raise net.read_timeout if it is only slow", ec);
}

bool ok(const net::http_response& r) { return r.status / 100 == 2; }

}  // namespace

std::string mask_key_id(std::string_view id) {
  const std::size_t shown = std::min<std::size_t>(4, id.size() / 4);
  return fmt::format("{}…{}", id.substr(0, shown), id.substr(id.size() - shown));
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
  co_return close_check(act, passed(std::string(list_check),
                                    fmt::format("s3://{}/{} can be listed (access key {})", t.url.bucket, prefix,
                                                t.key_id)));
}

asio::awaitable<check_result> check_write(tracing::action& parent, storage_link& link, const bucket_target& t) {
  auto act = open_check(parent, write_check);
  storage_call put{.operation = "PutObject", .method = net::http::verb::put, .bucket = t.url.bucket,
                   .key = probe_key(t.url)};
  put.body = "written by `ferry doctor`, which deletes it again\n";
  diagnostics diag;
  auto r = co_await link.send(act, put, diag);
  if (!r) co_return close_check(act, unanswered(write_check, r.error(), diag));
  if (!ok(*r)) co_return close_check(act, refused(write_check, put, *r, link, t));

  const auto where = fmt::format("s3://{}/{}", put.bucket, put.key);
  storage_call del{.operation = "DeleteObject", .method = net::http::verb::delete_, .bucket = put.bucket,
                   .key = put.key};
  auto gone = co_await link.send(act, del, diag);
  check_result out;
  if (!gone)
    out = unanswered(write_check, gone.error(), diag);
  else if (!ok(*gone))
    out = refused(write_check, del, *gone, link, t);
  if (out.status == check_status::failed) {
    out.detail = fmt::format("{} was written but not deleted: {}", where, out.detail);
    out.fix += fmt::format("; then remove it: `ferry storage rm {}`", where);
    co_return close_check(act, std::move(out));
  }
  co_return close_check(act, passed(std::string(write_check),
                                    fmt::format("wrote and deleted {} ({} bytes)", where, put.body.size())));
}

}  // namespace ferry::agent::doctor
