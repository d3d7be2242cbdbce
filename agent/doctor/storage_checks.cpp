#include "agent/doctor/storage_checks.hpp"

#include "agent/doctor/bucket_checks.hpp"
#include "agent/doctor/storage_link.hpp"
#include "config/error.hpp"
#include "net/aws_profile.hpp"
#include "net/cancellation.hpp"
#include "net/credentials.hpp"
#include "net/error.hpp"
#include "net/run_all.hpp"
#include "net/tls_context.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

namespace ferry::agent::doctor {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;

// SigV4 requests are refused beyond this difference between the signer's clock and storage's.
constexpr std::chrono::minutes max_skew{15};

struct found_credentials {
  check_result result;
  std::optional<net::aws_profile> profile;
  std::optional<net::credentials> creds;
};

std::string profile_fix(const error_code& ec) {
  if (ec == net::errc::profile_not_found)
    return "set AWS_PROFILE to a profile your AWS config or credentials file defines, or unset it";
  return "repair or make readable the AWS file named above (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE)";
}

std::string credentials_fix(const error_code& ec) {
  if (ec == net::errc::incomplete_credentials)
    return "set the missing half of the key pair next to the other (both AWS_ACCESS_KEY_ID and "
           "AWS_SECRET_ACCESS_KEY, or both aws_access_key_id and aws_secret_access_key in the profile)";
  return "export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or put aws_access_key_id and aws_secret_access_key "
         "in the profile's section of ~/.aws/credentials (`aws configure`)";
}

// Found the way every command finds them (net::resolve_credentials); shown as where, and the key id masked.
found_credentials check_credentials(tracing::action& parent, const net::environment& env) {
  constexpr std::string_view name = "credentials";
  auto act = open_check(parent, name);
  found_credentials out;
  diagnostics diag;
  auto profile = net::load_aws_profile(env, diag);
  if (!profile) {
    out.result = close_check(act, failed(std::string(name), diag.message, profile_fix(profile.error()), profile.error()));
    return out;
  }
  auto creds = net::resolve_credentials(env, *profile, diag);
  out.profile = std::move(*profile);
  if (!creds) {
    out.result = close_check(act, failed(std::string(name), diag.message, credentials_fix(creds.error()), creds.error()));
    return out;
  }
  out.result = close_check(act, passed(std::string(name),
                                       fmt::format("access key {} from {}{}", mask_key_id(creds->access_key_id),
                                                   creds->source,
                                                   creds->session_token.empty() ? "" : ", with a session token")));
  out.creds = std::move(*creds);
  return out;
}

std::string endpoint_fix(const error_code& ec, const storage_place& place) {
  const auto where = place.at.origin();
  // AWS's own endpoint is not mistyped: the network is in the way, or storage is not AWS.
  const auto change = place.setting.empty() ? std::string("set storage.endpoint (or AWS_ENDPOINT_URL) if storage is "
                                                          "not AWS S3")
                                            : fmt::format("correct {}", place.setting);
  if (ec == net::errc::timeout)
    return fmt::format("check that storage runs at {} and that this machine can reach it (firewall, VPN, proxy), "
                       "or raise net.connect_timeout if it is only slow", where);
  if (ec == net::errc::name_resolution_failed)
    return fmt::format("{}, or check this machine's DNS", change);
  if (ec == net::errc::tls_failed)
    return "name the CA that signed the endpoint's certificate in storage.ca_bundle, or use the endpoint's "
           "right host name";
  return fmt::format("start storage at {}, or {}", where, change);
}

asio::awaitable<check_result> check_endpoint(tracing::action& parent, storage_link& link) {
  constexpr std::string_view name = "endpoint";
  auto act = open_check(parent, name);
  const auto& place = link.place();
  diagnostics diag;
  auto reply = co_await link.ping(diag);
  if (!reply && is_interruption(reply.error()))
    co_return close_check(act, interrupted(std::string(name), fmt::format("{} ({}): interrupted before it answered",
                                                                          place.at.origin(), place.source),
                                           reply.error()));
  if (!reply)
    co_return close_check(act, failed(std::string(name),
                                      fmt::format("{} ({}) does not answer: {}", place.at.origin(), place.source,
                                                  describe(reply.error(), diag)),
                                      endpoint_fix(reply.error(), place), reply.error()));
  co_return close_check(act, passed(std::string(name),
                                    fmt::format("{} ({}; region {}) answered HTTP {} in {} ms", place.at.origin(),
                                                place.source, place.region, reply->status, reply->took.count())));
}

// "4.2 s", "14 min 59.9 s": tenths cut, never rounded, so a skew just under the limit never reads as the limit.
std::string span_text(std::int64_t ms) {
  ms = ms < 0 ? -ms : ms;
  if (ms < 60'000) return fmt::format("{}.{} s", ms / 1000, ms % 1000 / 100);
  return fmt::format("{} min {}.{} s", ms / 60'000, ms % 60'000 / 1000, ms % 1000 / 100);
}

// A Date further than this from ferry's clock is not a clock that drifted but a header that lies (or a
// server whose clock was never set): reported as such, and never turned into chrono types that overflow.
constexpr std::int64_t implausible_seconds = 366LL * 24 * 3600;

std::int64_t unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
}

asio::awaitable<check_result> check_clock(tracing::action& parent, storage_link& link,
                                          const storage_options& options) {
  constexpr std::string_view name = "clock";
  auto act = open_check(parent, name);
  diagnostics diag;
  auto reply = co_await link.ping(diag);
  if (!reply && is_interruption(reply.error()))
    co_return close_check(act, interrupted(std::string(name), "interrupted before storage answered", reply.error()));
  if (!reply)
    co_return close_check(act, failed(std::string(name), "cannot read storage's time: " + describe(reply.error(), diag),
                                      endpoint_fix(reply.error(), link.place()), reply.error()));
  if (!reply->server_seconds)
    co_return close_check(act, skipped(std::string(name), "storage's reply has no Date header to compare with"));
  const auto shifted = options.clock_offset_text.empty()
                           ? std::string()
                           : fmt::format(" (with --clock-offset {})", options.clock_offset_text);
  // Plain int64 seconds first: a Date centuries away must not overflow anything.
  const std::int64_t local_ms = unix_ms(reply->local_mid);
  const std::int64_t server_s = *reply->server_seconds;
  const std::int64_t local_s = local_ms / 1000;
  if (server_s > local_s + implausible_seconds || server_s < local_s - implausible_seconds)
    co_return close_check(
        act, failed(std::string(name),
                    fmt::format("storage's Date header is implausible: it is more than a year from ferry's clock{}",
                                shifted),
                    "set this machine's clock right, e.g. `timedatectl set-ntp true` (or chrony, ntpd), and check "
                    "that the endpoint is the storage you mean"));
  // The Date header counts whole seconds: storage's time was somewhere in the second it names.
  const std::int64_t skew = local_ms - (server_s * 1000 + 500);
  const auto text = fmt::format("ferry's clock{} is {} {} storage's (its Date header)", shifted, span_text(skew),
                                skew >= 0 ? "ahead of" : "behind");
  const std::int64_t limit = std::chrono::duration_cast<milliseconds>(max_skew).count();
  if (skew >= limit || skew <= -limit)
    co_return close_check(act, failed(std::string(name), text + ": SigV4 requests fail beyond 15 minutes",
                                      "set this machine's clock right, e.g. `timedatectl set-ntp true` (or chrony, "
                                      "ntpd)"));
  co_return close_check(act, passed(std::string(name), text + "; SigV4 allows 15 minutes"));
}

// storage.url as the bucket checks need it, or the failed check that says why not.
result<bucket_target> bucket_of(const command_context& ctx, const net::credentials& creds, check_result& problem) {
  const auto& storage = ctx.config.storage;
  if (storage.unset()) {
    problem = failed("storage.list", "storage.url is not set: ferry does not know which bucket to use",
                     "set FERRY_STORAGE_URL=s3://BUCKET/PREFIX, or url = \"s3://BUCKET/PREFIX\" under [storage] in "
                     "ferry.toml");
    return make_error_code(net::errc::bad_endpoint);
  }
  if (storage.malformed()) {
    const auto ec = make_error_code(config::errc::bad_value);
    const auto it = ctx.config.origin.find("storage.url");
    problem = failed("storage.list", fmt::format("storage.url ({}): {}", it == ctx.config.origin.end() ? "?" : it->second,
                                                 storage.why),
                     "write storage.url as s3://BUCKET/PREFIX", ec);
    return ec;
  }
  return bucket_target{*storage.url, mask_key_id(creds.access_key_id), creds.source};
}

// A check cut off by the shutdown's terminal cancellation, which net/'s HTTP requests throw from (they do
// not all hear Ctrl-C's first, total, step): the check is reported as interrupted, so that the report is
// still printed with what the other checks found.
asio::awaitable<check_result> or_interrupted(asio::awaitable<check_result> op, check_result if_cut) {
  std::optional<check_result> done;
  try {
    done = co_await std::move(op);
  } catch (const boost::system::system_error& e) {
    if (!is_interruption(e.code())) throw;
  }
  if (done) co_return std::move(*done);
  co_return if_cut;
}

check_result cut(std::string name, std::string detail = "interrupted before it finished") {
  return interrupted(std::move(name), std::move(detail), make_error_code(asio::error::operation_aborted));
}

asio::awaitable<void> check_bucket(tracing::action& parent, const command_context& ctx, storage_link& link,
                                   const net::credentials& creds, storage_report& out) {
  co_await net::accept_cancellation();
  check_result problem;
  auto target = bucket_of(ctx, creds, problem);
  if (!target) {
    auto act = open_check(parent, "storage.list");
    out.list = close_check(act, std::move(problem));
    out.write = skip_check(parent, "storage.write", "skipped: storage.url is not usable");
    co_return;
  }
  out.list = co_await or_interrupted(check_list(parent, link, *target), cut("storage.list"));
  if (!out.list.passed()) {
    out.write = skip_check(parent, "storage.write", "skipped: the listing did not pass");
    co_return;
  }
  auto key = probe_key(target->url);
  auto if_cut = left_behind(cut("storage.write"), target->url.bucket, key, "may have been written");
  out.write = co_await or_interrupted(check_write(parent, link, *target, key), std::move(if_cut));
}

asio::awaitable<void> run_clock(tracing::action& parent, storage_link& link, const storage_options& options,
                                check_result& out) {
  co_await net::accept_cancellation();
  out = co_await or_interrupted(check_clock(parent, link, options), cut("clock"));
}

// The TLS context an https endpoint needs; a failure is the endpoint's.
result<std::shared_ptr<asio::ssl::context>> tls_for(const command_context& ctx, const storage_place& place,
                                                    diagnostics& diag) {
  if (place.at.scheme != "https") return std::shared_ptr<asio::ssl::context>();
  return net::make_tls_context(ctx.config.values.storage.ca_bundle, diag);
}

void skip_after_endpoint(tracing::action& parent, storage_report& out, std::string_view why) {
  out.clock = skip_check(parent, "clock", fmt::format("skipped: {}", why));
  out.list = skip_check(parent, "storage.list", fmt::format("skipped: {}", why));
  out.write = skip_check(parent, "storage.write", fmt::format("skipped: {}", why));
}

}  // namespace

asio::awaitable<void> check_storage(tracing::action& parent, const command_context& ctx,
                                    const storage_options& options, storage_report& out) {
  // run_all spawns this half: without this it would hear only terminal cancellation, and Ctrl-C would
  // wait out every deadline (and the shutdown grace) before the report is printed.
  co_await net::accept_cancellation();
  const auto env = net::process_environment();
  auto found = check_credentials(parent, env);
  out.credentials = found.result;
  if (!found.profile) {
    out.endpoint = skip_check(parent, "endpoint", "skipped: the AWS profile that may name it cannot be read");
    skip_after_endpoint(parent, out, "the endpoint is unknown");
    co_return;
  }
  diagnostics diag;
  auto place = locate_storage(ctx.config, env, *found.profile, diag);
  std::shared_ptr<asio::ssl::context> tls;
  if (place) {
    auto made = tls_for(ctx, *place, diag);
    if (made) tls = *made; else place = made.error();
  }
  if (!place) {
    auto act = open_check(parent, "endpoint");
    out.endpoint = close_check(act, failed("endpoint", diag.message,
                                           "correct the endpoint URL (storage.endpoint, AWS_ENDPOINT_URL_S3, "
                                           "AWS_ENDPOINT_URL or the profile's endpoint_url) and storage.ca_bundle",
                                           place.error()));
    skip_after_endpoint(parent, out, "the endpoint is not usable");
    co_return;
  }
  storage_link link(ctx.io, ctx.config.values, std::move(*place), tls, found.creds, options.clock_offset);
  out.endpoint = co_await or_interrupted(check_endpoint(parent, link), cut("endpoint"));
  if (!out.endpoint.passed()) {
    skip_after_endpoint(parent, out, is_interruption(out.endpoint.cause) ? "interrupted" : "the endpoint does not answer");
    co_return;
  }
  std::vector<asio::awaitable<void>> tasks;
  tasks.push_back(run_clock(parent, link, options, out.clock));
  if (found.creds) {
    tasks.push_back(check_bucket(parent, ctx, link, *found.creds, out));
  } else {
    out.list = skip_check(parent, "storage.list", "skipped: no credentials to sign with");
    out.write = skip_check(parent, "storage.write", "skipped: no credentials to sign with");
  }
  co_await net::run_all(std::move(tasks));
}

}  // namespace ferry::agent::doctor
