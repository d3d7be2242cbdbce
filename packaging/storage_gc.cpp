#include "packaging/storage_gc.hpp"

#include "net/error.hpp"
#include "net/iso_time.hpp"
#include "packaging/layer.hpp"
#include "packaging/storage_lookup.hpp"
#include "packaging/upload_sweep.hpp"
#include "packaging/stored_manifest.hpp"
#include "packaging/zip_digest.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <map>
#include <set>

namespace ferry::packaging {

namespace asio = boost::asio;

namespace {

// An object's age in seconds; nullopt when storage wrote a date that cannot be read (never old then).
std::optional<std::int64_t> age_of(const net::s3_object& o, std::int64_t now) {
  const auto written = net::unix_seconds_of(o.last_modified);
  if (!written) return std::nullopt;
  return now - *written;
}

bool older_than(const net::s3_object& o, std::chrono::seconds max_age, std::int64_t now) {
  const auto age = age_of(o, now);
  return age && *age >= max_age.count();
}

// Adds the zip keys a manifest names to `kept`.
asio::awaitable<result<void>> keep_named(tracing::action& act, net::s3_client& s3, const std::string& bucket,
                                         const std::string& key, std::set<std::string>& kept, diagnostics& diag) {
  auto text = co_await read_small_object(act, s3, bucket, key, diag);
  if (!text) co_return text.error();
  if (!*text) co_return result<void>{};  // removed meanwhile: it names nothing any more
  auto manifest = parse_manifest(**text, diag);
  if (!manifest) {
    diag.set(fmt::format("the manifest s3://{}/{} cannot be read, so what it needs is unknown: {}", bucket, key,
                         diag.message));
    co_return manifest.error();
  }
  for (const auto& l : manifest->layers)
    for (const auto& s : l.shards) kept.insert(s.key);
  co_return result<void>{};
}

}  // namespace

asio::awaitable<result<gc_plan>> plan_gc(tracing::action& parent, net::s3_client& s3, const std::string& bucket,
                                         const std::string& prefix, std::chrono::seconds max_age, std::int64_t now,
                                         diagnostics& diag) {
  auto act = parent.child(action_types::storage::gc_plan, {{"prefix", prefix}, {"max_age_s", max_age.count()}});
  const auto root = key_prefix(prefix);
  auto manifests = co_await s3.list_objects(act, bucket, root + "manifests/", diag);
  if (!manifests) {
    act.fail(manifests.error(), diag);
    co_return manifests.error();
  }
  gc_plan plan;
  std::set<std::string> kept;
  for (const auto& m : *manifests) {
    if (!m.key.ends_with(".json")) continue;
    if (older_than(m, max_age, now)) {
      plan.manifests.push_back(m);
      plan.bytes += m.size;
      continue;
    }
    ++plan.live_manifests;
    if (auto named = co_await keep_named(act, s3, bucket, m.key, kept, diag); !named) {
      act.fail(named.error(), diag);
      co_return named.error();
    }
  }
  auto objects = co_await s3.list_objects(act, bucket, root + "layers/", diag);
  if (!objects) {
    act.fail(objects.error(), diag);
    co_return objects.error();
  }
  // Sidecars go with their zips; one whose zip is gone goes once it is old. Both codecs' zips (".zip",
  // ".zstd.zip") and their sidecars (".zip.sha256", ".zstd.zip.sha256") are layer zips here.
  std::map<std::string, net::s3_object> sidecars;
  std::set<std::string> zips;
  for (const auto& o : *objects) {
    if (o.key.ends_with(".zip.sha256"))
      sidecars.emplace(o.key, o);
    else if (codec_of_key(o.key))
      zips.insert(o.key);
  }
  for (const auto& o : *objects) {
    if (!codec_of_key(o.key)) continue;
    if (kept.contains(o.key) || !older_than(o, max_age, now)) {
      ++plan.kept_zips;
      continue;
    }
    plan.zips.push_back(o);
    plan.bytes += o.size;
    if (auto s = sidecars.find(sidecar_key(o.key)); s != sidecars.end()) {
      plan.zips.push_back(s->second);
      plan.bytes += s->second.size;
    }
  }
  for (const auto& [key, o] : sidecars) {
    const auto zip = key.substr(0, key.size() - std::string_view(".sha256").size());
    if (!zips.contains(zip) && !kept.contains(zip) && older_than(o, max_age, now)) {
      plan.zips.push_back(o);
      plan.bytes += o.size;
    }
  }
  auto blobs = co_await s3.list_objects(act, bucket, root + "blobs/", diag);
  if (!blobs) {
    act.fail(blobs.error(), diag);
    co_return blobs.error();
  }
  for (const auto& o : *blobs) {
    if (!older_than(o, max_age, now)) continue;
    plan.zips.push_back(o);
    plan.bytes += o.size;
  }
  auto uploads = co_await find_stale_uploads(act, s3, bucket, prefix, max_age, now, diag);
  if (!uploads) {
    act.fail(uploads.error(), diag);
    co_return uploads.error();
  }
  plan.uploads = std::move(uploads->stale);
  act.succeed({{"live_manifests", plan.live_manifests},
               {"manifests", plan.manifests.size()},
               {"objects", plan.zips.size()},
               {"kept", plan.kept_zips},
               {"uploads", plan.uploads.size()},
               {"bytes", plan.bytes}});
  co_return plan;
}

asio::awaitable<result<void>> apply_gc(tracing::action& parent, net::s3_client& s3, const std::string& bucket,
                                       const gc_plan& plan, diagnostics& diag) {
  auto act = parent.child(action_types::storage::gc, {{"manifests", plan.manifests.size()},
                                                      {"objects", plan.zips.size()},
                                                      {"uploads", plan.uploads.size()}});
  // Two requests, not one: the zips go only once no manifest names them any more.
  std::vector<std::string> manifests;
  for (const auto& m : plan.manifests) manifests.push_back(m.key);
  std::vector<std::string> zips;
  for (const auto& z : plan.zips) zips.push_back(z.key);
  // Not a co_await inside ?: (GCC 12 mishandles co_await in conditional operands).
  result<void> done;
  if (!manifests.empty()) done = co_await s3.delete_objects(act, bucket, manifests, diag);
  if (done && !zips.empty()) done = co_await s3.delete_objects(act, bucket, zips, diag);
  if (done && !plan.uploads.empty()) {
    const auto aborted = co_await abort_uploads(act, s3, bucket, plan.uploads);
    if (aborted < plan.uploads.size()) {
      diag.set(fmt::format("{} of {} multipart uploads could not be aborted (the trace names each and why: "
                           "ferry:packaging:sweep_failed)",
                           plan.uploads.size() - aborted, plan.uploads.size()));
      done = make_error_code(net::errc::s3_error);
    }
  }
  act.finish(done, diag, {{"bytes", plan.bytes}});
  co_return done;
}

}  // namespace ferry::packaging
