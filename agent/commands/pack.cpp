// `ferry pack`: discover the interpreter's sys.path, turn it into content-addressed layers and put the
// ones storage lacks there, with a manifest. `--explain` says why paths are in or out and what is big;
// `--dry-run` checks storage but uploads nothing; `--json` prints the report for programs.
#include "agent/commands/command.hpp"

#include "agent/cli/report.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/cli/json_output.hpp"
#include "agent/pack/pack_summary.hpp"
#include "agent/cli/plural.hpp"
#include "agent/pack/pack_job.hpp"
#include "agent/cli/progress_bar.hpp"
#include "net/run_all.hpp"
#include "net/s3_session.hpp"
#include "packaging/discovery_cache.hpp"
#include "packaging/pack.hpp"
#include "packaging/tree_walker.hpp"
#include "tracing/action_types.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using clock_type = std::chrono::steady_clock;

struct pack_args {
  bool explain = false;
  std::vector<std::string> explain_paths;
  bool dry_run = false;
  bool json_output = false;
  bool force = false;
};

// "hashing ..." then "uploading ...", for the progress bar.
std::string pack_line(const packaging::pack_progress& p, double seconds) {
  const auto& s = p.scan;
  if (p.shards_to_upload.load() > 0) {
    const auto zipped = p.bytes_zipped.load();
    return fmt::format("uploading  {} / {} layers  {} / {}  {:.0f} MB/s", p.shards_uploaded.load(),
                       p.shards_to_upload.load(), human_bytes(zipped), human_bytes(p.bytes_to_zip.load()),
                       seconds > 0 ? static_cast<double>(zipped) / seconds / 1e6 : 0.0);
  }
  if (s.files_to_hash.load() > 0) {
    return fmt::format("hashing  {} / {} files  {} / {}  {:.0f} MB/s", s.files_hashed.load(), s.files_to_hash.load(),
                       human_bytes(s.bytes_hashed.load()), human_bytes(s.bytes_to_hash.load()),
                       seconds > 0 ? static_cast<double>(s.bytes_hashed.load()) / seconds / 1e6 : 0.0);
  }
  return fmt::format("scanning  {}  {}", counted(s.files_found.load(), "file"), human_bytes(s.bytes_found.load()));
}

std::string_view status_name(packaging::layer_report::state s) {
  switch (s) {
    case packaging::layer_report::state::uploaded: return "uploaded";
    case packaging::layer_report::state::present: return "present";
    case packaging::layer_report::state::unknown: return "not-uploaded";
  }
  return "not-uploaded";
}

json::object json_report(const packaging::pack_report& r, const packaging::discovery& found,
                         const std::string& bucket, double seconds) {
  json::array layers;
  for (const auto& l : r.layers) {
    json::array shards;
    for (const auto& s : l.packed->shards) {
      // The digest of the stored zip, as the manifest has it; null when not known (a dry run, no storage).
      const auto digest = r.digests.find(s.id);
      const bool known = digest != r.digests.end();
      shards.push_back(json::object{
          {"id", net::to_hex(s.id)},
          {"sha256", known ? json::value(net::to_hex(digest->second.sha256)) : json::value(nullptr)},
          {"zip_bytes", known ? json::value(digest->second.zip_bytes) : json::value(nullptr)}});
    }
    layers.push_back(json::object{{"name", l.packed->name}, {"root", l.packed->root_index},
                                  {"id", net::to_hex(l.packed->id)}, {"files", l.packed->files.size()},
                                  {"bytes", l.packed->bytes}, {"shards", std::move(shards)},
                                  {"status", status_name(l.status)}, {"zip_bytes", l.zip_bytes}});
  }
  json::array warnings;
  for (const auto& w : r.scan.warnings) warnings.push_back(json::string(w.path + ": " + w.message));
  return json::object{{"python", json::object{{"version", found.version}, {"platform", found.platform_tag},
                                              {"executable", found.executable.string()}}},
                      {"layers", std::move(layers)},
                      {"files", r.scan.files},
                      {"bytes", r.scan.bytes},
                      {"hashed_files", r.scan.hashed_files},
                      {"hashed_bytes", r.scan.hashed_bytes},
                      {"uploaded_shards", r.uploaded_shards},
                      {"uploaded_bytes", r.uploaded_bytes},
                      {"manifest", bucket.empty() ? json::value(nullptr)
                                                  : json::value(fmt::format("s3://{}/{}", bucket, r.manifest_key))},
                      {"manifest_present", r.manifest_present},
                      {"warnings", std::move(warnings)},
                      {"seconds", json_seconds(seconds)}};
}

void print_summary(const packaging::pack_report& r, const packaging::discovery& found, const std::string& bucket,
                   bool dry_run, double seconds) {
  std::size_t uploaded = 0, present = 0;
  for (const auto& l : r.layers) {
    uploaded += l.status == packaging::layer_report::state::uploaded ? 1 : 0;
    present += l.status == packaging::layer_report::state::present ? 1 : 0;
  }
  fmt::print("packed {} ({}, {}) for Python {} {}\n", counted(r.layers.size(), "layer"), counted(r.scan.files, "file"),
             human_bytes(r.scan.bytes), found.version, found.platform_tag);
  fmt::print("  hashed {} ({}), the rest from the cache\n", counted(r.scan.hashed_files, "file"),
             human_bytes(r.scan.hashed_bytes));
  if (bucket.empty()) {
    fmt::print("  no storage.url: nothing uploaded\n");
  } else if (r.manifest_present) {
    fmt::print("  every layer already in storage\n");
  } else if (dry_run) {
    fmt::print("  would upload {}, {} already in storage\n", counted(r.layers.size() - present, "layer"), present);
  } else {
    fmt::print("  uploaded {} ({} zipped), {} already in storage\n", counted(uploaded, "layer"), human_bytes(r.uploaded_bytes),
               present);
  }
  if (!bucket.empty() && !dry_run) fmt::print("  manifest s3://{}/{}\n", bucket, r.manifest_key);
  fmt::print("  {:.2f} s\n", seconds);
}

// False when a PATH cannot be explained (outside the workspace, say): said on stderr, a usage error.
bool print_explanation(const packaging::pack_report& r, const std::vector<packaging::root_spec>& roots,
                       const pack_args& args, const packaging::pack_settings& settings) {
  std::vector<const packaging::file_entry*> files;
  for (const auto& l : r.scan.layers) {
    for (const auto& f : l.files) files.push_back(&f);
  }
  const auto shown = std::min<std::size_t>(20, files.size());
  std::partial_sort(files.begin(), files.begin() + static_cast<std::ptrdiff_t>(shown), files.end(),
                    [](auto* a, auto* b) { return a->key.size > b->key.size; });
  fmt::print("largest files:\n");
  for (std::size_t i = 0; i < shown; ++i) {
    fmt::print("  {:>10}  {}\n", human_bytes(files[i]->key.size),
               files[i]->source.empty() ? files[i]->path : files[i]->source);
  }
  fmt::print("largest layers:\n");
  std::vector<const packaging::layer*> layers;
  for (const auto& l : r.scan.layers) layers.push_back(&l);
  std::sort(layers.begin(), layers.end(), [](auto* a, auto* b) { return a->bytes > b->bytes; });
  for (std::size_t i = 0; i < std::min<std::size_t>(10, layers.size()); ++i) {
    fmt::print("  {:>10}  {} ({})\n", human_bytes(layers[i]->bytes), layers[i]->name, counted(layers[i]->files.size(), "file"));
  }
  if (args.explain_paths.empty() || roots.empty()) return true;
  bool explained = true;
  packaging::walk_options w;
  w.ignore = settings.scan.ignore;
  w.follow_external = settings.scan.follow_external;  // where links lead decides what lies below them
  for (const auto& p : args.explain_paths) {
    diagnostics diag;
    auto relative = std::filesystem::path(p).lexically_normal();
    if (relative.is_absolute()) relative = relative.lexically_relative(roots.front().path);
    auto why = packaging::explain_path(roots.front().path, relative.generic_string(), w, diag);
    if (why) {
      fmt::print("{}: {}\n", p, *why);
    } else {
      print_error(fmt::format("{}: {}", p, describe(why.error(), diag)));
      explained = false;
    }
  }
  return explained;
}

asio::awaitable<int> pack(command_context& ctx, const pack_args& args) {
  const auto start = clock_type::now();
  const auto& s = ctx.config.values;
  auto act = ctx.trace.child(action_types::packaging::pack, {{"dry_run", args.dry_run}, {"explain", args.explain}});
  diagnostics diag;
  if (ctx.config.storage.unset() && !args.dry_run && !args.explain) {
    print_error("storage.url is not set: put storage.url = \"s3://BUCKET/PREFIX\" in ferry.toml "
                "or set FERRY_STORAGE_URL (or pass --dry-run)");
    act.fail_exception("usage", "no storage.url");
    co_return exit_code::usage;
  }
  std::optional<net::s3_session> session;
  if (!args.explain) {
    auto opened = open_storage(ctx, diag);
    if (!opened) co_return report(act, opened.error(), diag);
    session = std::move(*opened);
  }
  pack_request request;
  request.dry_run = args.dry_run || args.explain;
  request.force = args.force;
  request.need_storage = false;

  packaging::pack_progress progress;
  result<pack_outcome> packed = error_code(asio::error::operation_aborted);
  auto work = [&]() -> asio::awaitable<void> {
    packed = co_await run_pack(act, ctx, session ? &*session : nullptr, request, &progress, diag);
  };
  if (ctx.interactive && ctx.options.verbosity >= 0 && !args.json_output) {
    progress_bar view(ctx.io, [&progress](double seconds) { return pack_line(progress, seconds); });
    std::vector<asio::awaitable<void>> tasks;
    tasks.push_back([](decltype(work)& w, progress_bar& v) -> asio::awaitable<void> {
      co_await w();
      v.stop();
    }(work, view));
    tasks.push_back(view.run());
    co_await net::run_all(std::move(tasks));
  } else {
    co_await work();
  }
  if (!packed) co_return report(act, packed.error(), diag);
  for (const auto& w : packed->warnings) fmt::print(stderr, "ferry: warning: {}\n", w);

  const auto& r = packed->report;
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (args.json_output) {
    fmt::print("{}\n", json_line(json_report(r, packed->found, packed->settings.bucket, seconds)));
  } else if (args.explain) {
    if (!print_explanation(r, packed->roots, args, packed->settings)) {
      act.fail_exception("usage", "a path of --explain cannot be explained");
      co_return exit_code::usage;
    }
  } else if (ctx.options.verbosity >= 0) {
    print_summary(r, packed->found, packed->settings.bucket, packed->settings.dry_run, seconds);
    std::fflush(stdout);  // the summary first, then what the first pack adds to it
    co_await say_first_pack(ctx, *packed);
  }
  act.succeed({{"layers", r.layers.size()}, {"files", r.scan.files}, {"uploaded_shards", r.uploaded_shards},
               {"uploaded_bytes", r.uploaded_bytes}, {"manifest", r.manifest_key}});
  co_return exit_code::success;
}

}  // namespace

void add_pack_command(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<pack_args>();
  auto* cmd = app.add_subcommand("pack", "pack the project and its Python path into layers and upload what is new");
  cmd->fallthrough();
  auto* explain = cmd->add_option("--explain", args->explain_paths,
                                  "list the largest files, and say which rule includes or excludes each PATH");
  explain->type_name("PATH");
  explain->expected(1, -1);  // without a PATH it is a usage error, as any option missing its value
  cmd->add_flag("--dry-run", args->dry_run, "hash and check storage, upload nothing");
  cmd->add_flag("--json", args->json_output, "print the report as JSON");
  cmd->add_flag("--force", args->force, "pack layers over packaging.max_layer_size");
  cmd->callback([&selected, args, explain] {
    args->explain = explain->count() > 0;
    selected.action_type = action_types::packaging::pack;
    selected.run = [args](command_context& ctx) { return pack(ctx, *args); };
  });
}

}  // namespace ferry::agent
