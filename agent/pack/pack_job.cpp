#include "agent/pack/pack_job.hpp"

#include "packaging/import_order.hpp"

#include "packaging/zip_digest_cache.hpp"
#include "agent/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <unistd.h>

namespace ferry::agent {

namespace asio = boost::asio;

packaging::discover_options discover_options_for(const command_context& ctx) {
  const auto& s = ctx.config.values;
  packaging::discover_options o;
  o.python = s.packaging.python;
  o.working_dir = std::filesystem::current_path();
  o.ship_site_packages = s.packaging.ship_site_packages;
  o.timeout = s.packaging.discover_timeout;
  o.cache_file = s.dirs.cache / "discovery.json";
  return o;
}

std::vector<packaging::root_spec> roots_of(const packaging::discovery& found, std::vector<std::string>& warnings) {
  std::vector<packaging::root_spec> roots;
  for (const auto* e : found.shipped()) {
    using k = packaging::discovery_entry::kind;
    packaging::root_spec r;
    r.path = e->path;
    r.index = roots.size();
    switch (e->what) {
      case k::workspace: r.type = packaging::root_spec::kind::workspace; break;
      case k::site_packages: r.type = packaging::root_spec::kind::site_packages; break;
      case k::zip_file:
        warnings.push_back(fmt::format("{}: a zip file on sys.path is not packed; unpack it into a directory",
                                       e->path.string()));
        continue;
      default: r.type = packaging::root_spec::kind::other; break;
    }
    roots.push_back(std::move(r));
  }
  return roots;
}

packaging::pack_settings pack_settings_for(const command_context& ctx, const pack_request& request) {
  const auto& s = ctx.config.values;
  packaging::pack_settings p;
  p.scan.ignore.excludes = s.packaging.excludes;
  p.scan.follow_external = s.packaging.external_symlinks == "follow";
  p.scan.large_file_warning = s.packaging.large_file_warning.bytes;
  p.scan.shard_size = s.packaging.shard_size.bytes;
  p.scan.threads = s.packaging.hash_threads > 0 ? static_cast<std::size_t>(s.packaging.hash_threads)
                                                : std::max(1u, std::thread::hardware_concurrency());
  p.zip.level = s.packaging.compression_level;
  // The schema admits only "zstd" and "deflate".
  p.zip.codec = packaging::parse_zip_codec(s.packaging.codec).value_or(packaging::zip_codec::zstd);
  p.zip.zstd_level = s.packaging.zstd_level;
  p.max_layer_size = s.packaging.max_layer_size.bytes;
  p.force = request.force;
  p.dry_run = request.dry_run;
  p.check_concurrency = static_cast<std::size_t>(std::max(1, s.s3.max_concurrency));
  p.upload_concurrency = packaging::upload_workers(p.scan.threads, p.check_concurrency);
  p.stale_upload_age = std::chrono::duration_cast<std::chrono::seconds>(s.packaging.stale_upload_age);
  p.manifest_refresh = std::chrono::duration_cast<std::chrono::seconds>(s.packaging.manifest_refresh);
  return p;
}

result<std::optional<net::s3_session>> open_storage(const command_context& ctx, diagnostics& diag) {
  const auto& s = ctx.config.values;
  if (ctx.config.storage.malformed()) return ctx.config.storage.refuse(diag);
  if (!ctx.config.storage.url) return std::optional<net::s3_session>();
  auto opened = net::open_s3_session(ctx.io, ctx.cpu, s, net::process_environment(), diag, stall_notice());
  if (!opened) return opened.error();
  return std::optional<net::s3_session>(std::move(*opened));
}

net::stall_watch::notice stall_notice() {
  // On a terminal the line first clears a progress display drawn there, which redraws below it.
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  return [terminal](const std::string& line) {
    fmt::print(stderr, "{}ferry: warning: {}\n", terminal ? "\r\x1b[K" : "", line);
  };
}

asio::awaitable<result<pack_outcome>> run_pack(tracing::action& act, const command_context& ctx,
                                               net::s3_session* session, const pack_request& request,
                                               packaging::pack_progress* progress, diagnostics& diag) {
  const auto& s = ctx.config.values;
  pack_outcome out;
  out.settings = pack_settings_for(ctx, request);
  if (const auto& url = ctx.config.storage.url; session && url) {
    out.settings.bucket = url->bucket;
    out.settings.prefix = url->key;
  } else if (request.need_storage) {
    diag.set("storage.url is not set: put storage.url = \"s3://BUCKET/PREFIX\" in ferry.toml or set "
             "FERRY_STORAGE_URL");
    co_return error_code(errc::no_storage);
  }
  auto found = co_await packaging::discover(act, discover_options_for(ctx), diag);
  if (!found) co_return found.error();
  out.found = std::move(*found);
  out.roots = roots_of(out.found, out.warnings);
  if (session) {
    for (const auto& r : out.roots) {
      if (r.type != packaging::root_spec::kind::workspace) continue;
      out.settings.import_order_key = packaging::import_order_key(out.settings.prefix, packaging::project_id(r.path));
      break;
    }
  }

  auto cache = packaging::hash_cache::load(s.dirs.cache / "hashes.bin", nullptr);
  auto digests = packaging::zip_digest_cache::load(s.dirs.cache / "zip-digests", nullptr);
  const auto python = packaging::python_info_of(out.found);
  // The site plan follows from the scan: made as soon as the scan is done, for nodes that start early.
  packaging::pack_progress own_progress;
  if (!progress) progress = &own_progress;
  const auto scanned = std::move(progress->on_scanned);
  progress->on_scanned = [&](const packaging::scan_result& scan, const std::vector<std::size_t>& ranks) {
    out.site = packaging::plan_site(out.found, out.roots, scan.layers);
    for (const auto& w : out.site.warnings) out.warnings.push_back(w);
    if (request.on_site) request.on_site(out, scan);
    if (scanned) scanned(scan, ranks);
  };
  auto packed = co_await packaging::pack(act, ctx.cpu, session ? session->s3.get() : nullptr, out.roots, python,
                                         out.settings, cache, digests, progress, diag);
  progress->on_scanned = scanned;
  if (!packed) co_return packed.error();
  out.report = std::move(*packed);
  for (const auto& w : out.report.scan.warnings) out.warnings.push_back(w.path + ": " + w.message);
  out.layers_present = static_cast<std::size_t>(
      std::count_if(out.report.layers.begin(), out.report.layers.end(), [](const packaging::layer_report& l) {
        return l.status == packaging::layer_report::state::present;
      }));
  if (out.report.manifest_present) out.layers_present = out.report.layers.size();
  co_return out;
}

}  // namespace ferry::agent
