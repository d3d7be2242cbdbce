#include "packaging/pack.hpp"

#include "net/cancellation.hpp"
#include "net/error.hpp"
#include "net/fan_out.hpp"
#include "net/iso_time.hpp"
#include "packaging/error.hpp"
#include "packaging/import_order.hpp"
#include "packaging/layer_upload.hpp"
#include "packaging/storage_lookup.hpp"
#include "packaging/stored_manifest.hpp"
#include "packaging/upload_sweep.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <set>

namespace ferry::packaging {
namespace {

// One object to make: a shard, with every layer report it serves (identical shards are stored once).
struct shard_job {
  const layer* owner = nullptr;
  const shard* part = nullptr;
  std::string key;
  std::vector<std::size_t> reports;
  bool present = false;   // storage holds the zip and its digest is known: nothing to upload
  bool checked = false;   // storage was asked whether it holds the shard
  bool uploaded = false;
  zip_digest digest;      // of the stored zip, once present or uploaded
};

result<void> check_sizes(const scan_result& scan, const pack_settings& settings, diagnostics& diag) {
  for (const auto& l : scan.layers) {
    if (l.bytes > settings.max_layer_size && !settings.force) {
      diag.set(fmt::format("layer {} holds {} MiB, over packaging.max_layer_size ({} MiB): exclude what it need not "
                           "carry, raise the limit, or pass --force",
                           l.name, l.bytes >> 20, settings.max_layer_size >> 20));
      return error_code(errc::layer_too_large);
    }
  }
  return {};
}

std::vector<shard_job> shard_jobs(const scan_result& scan, const std::string& prefix, zip_codec codec) {
  std::vector<shard_job> jobs;
  std::map<std::string, std::size_t> by_key;
  for (std::size_t i = 0; i < scan.layers.size(); ++i) {
    const auto& l = scan.layers[i];
    for (const auto& s : l.shards) {
      auto key = shard_key(prefix, s, codec);
      auto [it, inserted] = by_key.emplace(key, jobs.size());
      if (inserted) jobs.push_back({&l, &s, std::move(key), {}});
      jobs[it->second].reports.push_back(i);
    }
  }
  return jobs;
}

// Tells the caller of each layer as its shards reach storage (pack_progress::on_layer_shipped at the first,
// on_shard_shipped for each after it).
class shipping {
 public:
  shipping(const scan_result& scan, std::string_view prefix, zip_codec codec, pack_progress* progress)
      : scan_(scan), prefix_(prefix), codec_(codec),
        progress_(progress && progress->on_layer_shipped ? progress : nullptr), shipped_(scan.layers.size(), false) {}

  // Layers without shards are in storage from the start.
  void start() {
    for (std::size_t i = 0; i < shipped_.size(); ++i)
      if (scan_.layers[i].shards.empty()) ship(i);
  }
  // A shard job is in storage with this digest: each of its layers is shipped now, or hears of the shard.
  void stored(const sha256_digest& shard_id, const std::vector<std::size_t>& layers, const zip_digest& digest) {
    digests_[shard_id] = digest;
    for (auto i : layers) {
      if (!shipped_[i]) {
        ship(i);
        continue;
      }
      if (!progress_ || !progress_->on_shard_shipped) continue;
      const auto& shards = scan_.layers[i].shards;
      for (std::size_t j = 0; j < shards.size(); ++j)
        if (shards[j].id == shard_id) progress_->on_shard_shipped(i, j, shipped(scan_.layers[i], shards[j]));
    }
  }
  // Everything is in storage (a manifest found): every layer at once.
  void all(const shard_digests& digests) {
    digests_ = digests;
    for (std::size_t i = 0; i < shipped_.size(); ++i) ship(i);
  }

 private:
  shipped_shard shipped(const layer& l, const shard& s) const {
    shipped_shard out{shard_key(prefix_, s, codec_), {}, 0, s.count, s.bytes, net::to_hex(s.id)};
    if (s.piece) {
      const auto& piece = l.files_of(s).front();
      out.piece_path = piece.path;
      out.piece_offset = piece.piece_offset;
      out.file_size = piece.key.size;
    }
    if (const auto d = digests_.find(s.id); d != digests_.end()) {
      out.sha256 = net::to_hex(d->second.sha256);
      out.zip_bytes = d->second.zip_bytes;
    }
    return out;
  }

  void ship(std::size_t i) {
    shipped_[i] = true;
    if (!progress_) return;
    const auto& l = scan_.layers[i];
    shipped_layer out{i, &l, {}};
    for (const auto& s : l.shards) out.shards.push_back(shipped(l, s));
    progress_->on_layer_shipped(out);
  }

  const scan_result& scan_;
  std::string_view prefix_;
  zip_codec codec_;
  pack_progress* progress_;
  std::vector<bool> shipped_;  // by layer: on_layer_shipped was called
  shard_digests digests_;
};

asio::awaitable<result<void>> check_one(tracing::action& act, net::s3_client& s3, const std::string& bucket,
                                        shard_job& job, zip_digest_cache& digests, diagnostics& diag) {
  auto found = co_await find_stored_digest(act, s3, bucket, job.key, job.part->id, digests, diag);
  job.checked = true;
  if (!found) co_return found.error();
  if (*found) {
    job.present = true;
    job.digest = **found;
  }
  co_return result<void>{};
}

// What every upload of one pack shares.
struct upload_context {
  tracing::action& parent;
  net::s3_client& s3;
  net::cpu_pool& pool;
  const pack_settings& settings;
  zip_digest_cache& digests;
  shipping& shipped;  // told of each shard in storage
  pack_progress* progress;
};

asio::awaitable<result<void>> upload_one(upload_context& c, shard_job& job, diagnostics& diag) {
  if (!job.checked) {
    // Asked here rather than in a phase of its own: while this upload waits for storage's answer, the
    // others keep the pool compressing.
    if (auto checked = co_await check_one(c.parent, c.s3, c.settings.bucket, job, c.digests, diag); !checked)
      co_return checked;
    if (job.present) {
      if (c.progress) {
        c.progress->shards_to_upload -= 1;
        c.progress->bytes_to_zip -= job.part->bytes;
      }
      c.shipped.stored(job.part->id, job.reports, job.digest);
      co_return result<void>{};
    }
  }
  // The layer's id and the shard's place in it match the node's shard actions (ferry:materialise:shard),
  // so the trace tells how soon after its upload a node fetched a shard.
  auto act = c.parent.child(action_types::packaging::upload,
                            {{"layer", job.owner->name}, {"layer_id", net::to_hex(job.owner->id)},
                             {"shard", job.part - job.owner->shards.data() + 1}, {"key", job.key},
                             {"files", job.part->count}, {"bytes", job.part->bytes}});
  auto done = co_await upload_shard(act, c.s3, c.pool, *job.owner, *job.part, c.settings.bucket, job.key,
                                    c.settings.zip, c.progress ? &c.progress->bytes_zipped : nullptr, diag);
  if (!done) {
    act.fail(done.error(), diag);
    co_return done.error();
  }
  job.uploaded = true;
  job.digest = zip_digest{done->sha256, done->zip_bytes};
  c.digests.insert(job.part->id, c.settings.zip.codec, job.digest, done->etag);
  c.shipped.stored(job.part->id, job.reports, job.digest);
  if (c.progress) {
    c.progress->shards_uploaded += 1;
    c.progress->bytes_uploaded += done->zip_bytes;
  }
  act.succeed({{"zip_bytes", done->zip_bytes}, {"parts", done->parts}, {"sha256", net::to_hex(done->sha256)}});
  co_return result<void>{};
}

asio::awaitable<result<void>> check_storage(tracing::action& parent, net::s3_client& s3,
                                            const pack_settings& settings, std::vector<shard_job>& jobs,
                                            zip_digest_cache& digests, diagnostics& diag) {
  auto act = parent.child(action_types::packaging::check, {{"objects", jobs.size()}});
  auto r = co_await net::fan_out(
      jobs.size(), settings.check_concurrency,
      [&](std::size_t i, diagnostics& d) { return check_one(act, s3, settings.bucket, jobs[i], digests, d); }, diag);
  std::size_t present = 0;
  for (const auto& j : jobs) present += j.present ? 1 : 0;
  act.finish(r, diag, {{"present", present}});
  co_return r;
}

asio::awaitable<result<void>> upload_missing(tracing::action& parent, net::s3_client& s3, net::cpu_pool& pool,
                                             const pack_settings& settings, std::vector<shard_job>& jobs,
                                             const std::vector<std::size_t>& ranks, zip_digest_cache& digests,
                                             pack_progress* progress, shipping& shipped, diagnostics& diag) {
  std::vector<shard_job*> todo;
  for (auto& j : jobs) {
    if (!j.present) todo.push_back(&j);
  }
  // In the order of arrival (the workspace first, then what runs imported first, then the rest largest
  // first), and within a layer in shard order: a node starts on a layer's first shard while the next ones
  // are zipped, and puts the layer in place as soon after its last shard as it can.
  auto rank_of = [&](const shard_job* j) {
    std::size_t best = SIZE_MAX;
    for (auto i : j->reports) best = std::min(best, i < ranks.size() ? ranks[i] : SIZE_MAX);
    return best;
  };
  auto place_of = [](const shard_job* j) { return j->part - j->owner->shards.data(); };  // in its layer
  std::stable_sort(todo.begin(), todo.end(), [&](auto* a, auto* b) {
    const auto ra = rank_of(a), rb = rank_of(b);
    if (ra != rb) return ra < rb;
    return place_of(a) < place_of(b);
  });
  if (progress) {
    progress->shards_to_upload = todo.size();
    for (auto* j : todo) progress->bytes_to_zip += j->part->bytes;
  }
  shipped.start();
  upload_context c{parent, s3, pool, settings, digests, shipped, progress};
  // Each worker takes the first job left when it is free, not the i-th: a layer a node waits for
  // (pack_progress::hurry) can jump the queue.
  std::size_t taken = 0;
  auto next_job = [&]() -> shard_job* {
    if (progress && !progress->hurried.empty()) {
      // Every shard of a hurried layer not started yet goes first; each group keeps its order.
      const auto& hurried = progress->hurried;
      std::stable_partition(todo.begin() + static_cast<std::ptrdiff_t>(taken), todo.end(), [&](const shard_job* j) {
        return std::any_of(j->reports.begin(), j->reports.end(), [&](std::size_t layer) {
          return std::find(hurried.begin(), hurried.end(), layer) != hurried.end();
        });
      });
      progress->hurried.clear();
    }
    return todo[taken++];
  };
  co_return co_await net::fan_out(
      todo.size(), settings.upload_concurrency,
      [&](std::size_t, diagnostics& d) { return upload_one(c, *next_job(), d); }, diag);
}

// What the manifest's two texts are made from.
struct manifest_parts {
  const python_info& python;
  std::span<const root_spec> roots;
  std::span<const layer> layers;
  std::string_view prefix;
  zip_codec codec;

  std::string content() const { return manifest_content_json(python, roots, layers, prefix, codec); }
  std::string body(const shard_digests& digests) const {
    return manifest_json(python, roots, layers, prefix, codec, digests);
  }
};

// The body stored at `key` when it is the one this pack would write: it parses with every shard's digest,
// and these layers with those digests give exactly its text (then `digests` holds them). nullopt: absent,
// or stored by an older ferry without digests, and to be written again.
asio::awaitable<result<std::optional<std::string>>> find_manifest(tracing::action& act, net::s3_client& s3,
                                                                  const std::string& bucket, const std::string& key,
                                                                  const manifest_parts& parts,
                                                                  shard_digests& digests, std::string& last_modified,
                                                                  diagnostics& diag) {
  using found = std::optional<std::string>;
  auto stored = co_await read_small_object(act, s3, bucket, key, diag, &last_modified);
  if (!stored || !*stored) co_return stored;
  diagnostics why;
  auto parsed = parse_manifest(**stored, why);
  if (!parsed) {
    act.log(action_types::packaging::manifest_outdated, {{"key", key}, {"reason", why.message}});
    co_return found{};
  }
  shard_digests in_body;
  for (const auto& l : parsed->layers) {
    for (const auto& s : l.shards) {
      // parse_manifest checked both are 64 hex digits.
      in_body[*parse_hex_digest(s.id)] = zip_digest{*parse_hex_digest(s.sha256), s.zip_bytes};
    }
  }
  for (const auto& l : parts.layers) {
    for (const auto& s : l.shards) {
      if (!in_body.contains(s.id)) {
        act.log(action_types::packaging::manifest_outdated, {{"key", key}, {"reason", "a shard's digest is missing"}});
        co_return found{};
      }
    }
  }
  if (parts.body(in_body) != **stored) {
    act.log(action_types::packaging::manifest_outdated, {{"key", key}, {"reason", "not the text this ferry writes"}});
    co_return found{};
  }
  digests = std::move(in_body);
  co_return stored;
}

// Stores a found manifest again (the same bytes) once it is `manifest_refresh` old, so that its
// Last-Modified says it is in use: `ferry storage gc` keeps what manifests newer than its age name, and a
// project packed every day without a change must not look abandoned. An unreadable date counts as old.
asio::awaitable<result<void>> refresh_manifest(tracing::action& act, net::s3_client& s3, const pack_settings& settings,
                                               pack_report& report, const std::string& last_modified,
                                               diagnostics& diag) {
  const auto written = net::unix_seconds_of_http_date(last_modified);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  if (written && now - *written < settings.manifest_refresh.count()) co_return result<void>{};
  act.log(action_types::packaging::manifest_refreshed, {{"key", report.manifest_key}, {"last_modified", last_modified}});
  const std::span<const char> body(report.manifest_text.data(), report.manifest_text.size());
  auto put = co_await s3.put_object(act, settings.bucket, report.manifest_key, body, diag);
  if (!put) co_return put.error();
  co_return result<void>{};
}

void fill_reports(pack_report& report, const std::vector<shard_job>& jobs, bool storage) {
  // A layer is present unless one of its shards was uploaded (or, in a dry run, is missing).
  report.layers.resize(report.scan.layers.size());
  for (std::size_t i = 0; i < report.layers.size(); ++i) {
    report.layers[i].packed = &report.scan.layers[i];
    report.layers[i].status = storage ? layer_report::state::present : layer_report::state::unknown;
  }
  if (report.manifest_present) return;
  for (const auto& j : jobs) {
    for (auto i : j.reports) {
      auto& r = report.layers[i];
      if (j.uploaded) {
        r.status = layer_report::state::uploaded;
        r.zip_bytes += j.digest.zip_bytes;
      } else if (!j.present) {
        r.status = layer_report::state::unknown;
      }
    }
  }
}

// Before a pack uploads: uploads an earlier pack left behind go. Its failure never fails the pack.
asio::awaitable<void> sweep(tracing::action& parent, net::s3_client& s3, const pack_settings& settings) {
  if (settings.stale_upload_age.count() <= 0) co_return;
  diagnostics d;
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  (void)co_await sweep_stale_uploads(parent, s3, settings.bucket, settings.prefix, settings.stale_upload_age, now, d);
}

}  // namespace

asio::awaitable<result<pack_report>> pack(tracing::action& parent, net::cpu_pool& pool, net::s3_client* s3,
                                          std::span<const root_spec> roots, const python_info& python,
                                          const pack_settings& settings, hash_cache& cache,
                                          zip_digest_cache& digests, pack_progress* progress, diagnostics& diag) {
  pack_report report;
  auto scanned = co_await scan_layers(parent, pool, roots, settings.scan, cache, progress ? &progress->scan : nullptr,
                                      diag);
  if (!scanned) co_return scanned.error();
  report.scan = std::move(*scanned);
  // The hashes are good whatever happens to the upload: keep them.
  if (diagnostics d; !cache.save(d)) parent.log(action_types::packaging::cache_not_saved, {{"reason", d.message}});
  if (auto r = check_sizes(report.scan, settings, diag); !r) co_return r.error();
  const bool storage = s3 && !settings.bucket.empty();
  if (storage && !settings.import_order_key.empty()) {
    // A hint: storage that cannot give it costs the order, never the pack, and is asked once. (Storage that
    // stalls on it is a stall all the same: the next request ends the pack with it.)
    diagnostics ignored;
    auto text = co_await read_small_object(parent, *s3, settings.bucket, settings.import_order_key, ignored,
                                           nullptr, true);
    if (text && *text) report.import_order = parse_import_order(**text);
  }
  report.ranks = layer_ranks(report.scan, roots, report.import_order);
  if (progress && progress->on_scanned) progress->on_scanned(report.scan, report.ranks);

  auto manifest_act = parent.child(action_types::packaging::manifest);
  const manifest_parts parts{python, roots, report.scan.layers, settings.prefix, settings.zip.codec};
  report.manifest_text = parts.content();
  report.manifest_key = manifest_key(settings.prefix, report.manifest_text);
  auto jobs = shard_jobs(report.scan, settings.prefix, settings.zip.codec);
  if (storage) {
    // A GET, not a HEAD: the same one request, and it brings the digests a found manifest holds.
    std::string last_modified;
    auto found = co_await find_manifest(manifest_act, *s3, settings.bucket, report.manifest_key, parts,
                                        report.digests, last_modified, diag);
    if (!found) {
      manifest_act.fail(found.error(), diag);
      co_return found.error();
    }
    if (*found) {
      report.manifest_present = true;
      report.manifest_text = std::move(**found);
      if (!settings.dry_run) {
        if (auto r = co_await refresh_manifest(manifest_act, *s3, settings, report, last_modified, diag); !r) {
          manifest_act.fail(r.error(), diag);
          co_return r.error();
        }
        shipping(report.scan, settings.prefix, settings.zip.codec, progress).all(report.digests);
      }
    }
  }
  if (storage && !report.manifest_present) {
    // A dry run only asks; a real one asks each shard's worker just before it would zip it.
    result<void> shipped;
    if (settings.dry_run) {
      shipped = co_await check_storage(parent, *s3, settings, jobs, digests, diag);
    } else {
      co_await sweep(parent, *s3, settings);
      shipping ship(report.scan, settings.prefix, settings.zip.codec, progress);
      shipped = co_await upload_missing(parent, *s3, pool, settings, jobs, report.ranks, digests, progress, ship, diag);
    }
    // The digests learned are good whatever happens to the rest: keep them.
    if (diagnostics d; !digests.save(d))
      parent.log(action_types::packaging::digest_cache_not_saved, {{"reason", d.message}});
    if (!shipped) co_return shipped.error();
    for (const auto& j : jobs) {
      if (j.present || j.uploaded) report.digests[j.part->id] = j.digest;
    }
    if (!settings.dry_run) {
      report.manifest_text = parts.body(report.digests);
      const std::span<const char> body(report.manifest_text.data(), report.manifest_text.size());
      auto put = co_await s3->put_object(manifest_act, settings.bucket, report.manifest_key, body, diag);
      if (!put) {
        manifest_act.fail(put.error(), diag);
        co_return put.error();
      }
    }
  }
  for (const auto& j : jobs) {
    if (j.uploaded) {
      report.uploaded_bytes += j.digest.zip_bytes;
      ++report.uploaded_shards;
    }
  }
  fill_reports(report, jobs, storage);
  manifest_act.succeed({{"key", report.manifest_key}, {"present", report.manifest_present},
                        {"uploaded_shards", report.uploaded_shards}, {"uploaded_bytes", report.uploaded_bytes}});
  co_return report;
}

}  // namespace ferry::packaging
