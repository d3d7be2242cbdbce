// `ferry storage ls|cp|rm`: a person's view of the bucket ferry uses, through the same client.
#include "agent/commands/command.hpp"

#include "agent/cli/report.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/pack/pack_job.hpp"
#include "agent/cli/progress_bar.hpp"
#include "config/s3_url.hpp"
#include "net/run_all.hpp"
#include "net/s3_session.hpp"
#include "net/s3_transfer.hpp"
#include "packaging/storage_gc.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string_view>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;

struct storage_args {
  std::string url;
  std::string source;
  std::string destination;
  bool recursive = false;
  bool for_nodes = false;
  std::string expires = "1h";
  std::string older_than = "30d";
  bool remove = false;
};

// The configured S3, endpoint and credentials found the AWS way.
result<net::s3_session> open_session(command_context& ctx, diagnostics& diag) {
  return net::open_s3_session(ctx.io, ctx.cpu, ctx.config.values, net::process_environment(), diag, stall_notice());
}

// What a URL argument must name. A bucket or a prefix where one object is meant is refused before any
// request: `cp s3://bucket x` once wrote the bucket's listing into x, and `rm s3://bucket/` said "deleted".
enum class names { anything, object };

// The URL, or nothing after telling the user why (exit code 2: the command line is wrong, not storage).
// `hint` follows the message when the URL names a bucket or a prefix instead of an object.
std::optional<config::s3_url> url_argument(tracing::action& act, std::string_view text, names what,
                                           std::string_view hint = {}) {
  diagnostics diag;
  auto url = config::parse_s3_url(text, diag);
  if (url && what == names::object && (url->key.empty() || url->key.ends_with('/')))
    diag.set(fmt::format("'{}' names {}, not an object (expected s3://BUCKET/KEY{})", text,
                         url->key.empty() ? "a bucket" : "a prefix", hint));
  else if (url)
    return std::move(*url);
  print_error(diag.message);
  act.fail_exception("usage", diag.message);
  return std::nullopt;
}

asio::awaitable<int> ls(command_context& ctx, const storage_args& args) {
  auto act = ctx.trace.child(action_types::storage::ls, {{"url", args.url}});
  auto url = url_argument(act, args.url, names::anything);
  if (!url) co_return exit_code::usage;
  diagnostics diag;
  auto session = open_session(ctx, diag);
  if (!session) co_return report(act, session.error(), diag);
  auto objects = co_await session->s3->list_objects(act, url->bucket, url->key, diag);
  if (!objects) co_return report(act, objects.error(), diag);
  for (const auto& o : *objects) fmt::print("{:>14}  {}  s3://{}/{}\n", o.size, o.last_modified, url->bucket, o.key);
  act.succeed({{"objects", objects->size()}});
  co_return exit_code::success;
}

asio::awaitable<int> rm(command_context& ctx, const storage_args& args) {
  auto act = ctx.trace.child(action_types::storage::rm, {{"url", args.url}, {"recursive", args.recursive}});
  auto url = url_argument(act, args.url, args.recursive ? names::anything : names::object,
                          "; -r deletes everything under a prefix");
  if (!url) co_return exit_code::usage;
  diagnostics diag;
  auto session = open_session(ctx, diag);
  if (!session) co_return report(act, session.error(), diag);
  std::vector<std::string> keys;
  if (args.recursive) {
    auto objects = co_await session->s3->list_objects(act, url->bucket, url->key, diag);
    if (!objects) co_return report(act, objects.error(), diag);
    for (const auto& o : *objects) keys.push_back(o.key);
  } else {
    // A plain rm names one object, which must exist: deleting nothing by a typo should not look like success.
    auto head = co_await session->s3->head_object(act, url->bucket, url->key, diag);
    if (!head) co_return report(act, head.error(), diag);
    keys.push_back(url->key);
  }
  auto done = co_await session->s3->delete_objects(act, url->bucket, keys, diag);
  if (!done) co_return report(act, done.error(), diag);
  for (const auto& k : keys) fmt::print("deleted s3://{}/{}\n", url->bucket, k);
  act.succeed({{"objects", keys.size()}});
  co_return exit_code::success;
}

asio::awaitable<int> presign(command_context& ctx, const storage_args& args) {
  auto act = ctx.trace.child(action_types::storage::presign, {{"url", args.url}, {"for_nodes", args.for_nodes}});
  auto url = url_argument(act, args.url, names::object);
  if (!url) co_return exit_code::usage;
  diagnostics diag;
  const auto expires = config::parse_duration(args.expires);
  if (!expires || *expires < std::chrono::seconds(1) || *expires > std::chrono::hours(24 * 7)) {
    print_error(fmt::format("--expires '{}' must be a duration from 1s to 7d", args.expires));
    act.fail_exception("usage", "bad --expires");
    co_return exit_code::usage;
  }
  auto session = open_session(ctx, diag);
  if (!session) co_return report(act, session.error(), diag);
  const auto who = args.for_nodes ? net::s3_client::audience::nodes : net::s3_client::audience::workstation;
  fmt::print("{}\n", session->s3->presign_get(url->bucket, url->key, who,
                                               std::chrono::duration_cast<std::chrono::seconds>(*expires)));
  act.succeed();
  co_return exit_code::success;
}

// Runs a transfer with a progress bar beside it when stderr is a terminal.
template <class Transfer>
asio::awaitable<void> with_progress(command_context& ctx, const std::string& label, net::transfer_progress& progress,
                                    Transfer transfer) {
  if (!::isatty(STDERR_FILENO) || ctx.options.verbosity < 0) {
    co_await transfer();
    co_return;
  }
  progress_bar bar(ctx.io, label, progress);
  std::vector<asio::awaitable<void>> tasks;
  tasks.push_back([](Transfer t, progress_bar& b) -> asio::awaitable<void> {
    co_await t();
    b.stop();
  }(std::move(transfer), bar));
  tasks.push_back(bar.run());
  co_await net::run_all(std::move(tasks));
}

asio::awaitable<int> cp(command_context& ctx, const storage_args& args) {
  auto act = ctx.trace.child(action_types::storage::cp, {{"source", args.source}, {"destination", args.destination}});
  diagnostics diag;
  const bool upload = args.destination.starts_with("s3://");
  const bool download = args.source.starts_with("s3://");
  if (upload == download) {
    print_error("storage cp copies between a local file and an s3:// URL");
    act.fail_exception("usage", "storage cp needs exactly one s3:// side");
    co_return exit_code::usage;
  }
  // Uploaded to a bucket or a prefix, a file keeps its name; downloaded, the source must be one object.
  auto url = url_argument(act, upload ? args.destination : args.source, upload ? names::anything : names::object);
  if (!url) co_return exit_code::usage;
  std::error_code fs_ec;
  if (upload && std::filesystem::is_directory(args.source, fs_ec)) {
    print_error(fmt::format("'{}' is a directory; storage cp copies one file", args.source));
    act.fail_exception("usage", "the source is a directory");
    co_return exit_code::usage;
  }
  auto session = open_session(ctx, diag);
  if (!session) co_return report(act, session.error(), diag);

  net::transfer_progress progress;
  error_code failed;
  std::uint64_t bytes = 0;
  if (upload) {
    std::filesystem::path file = args.source;
    if (url->key.empty() || url->key.ends_with('/')) url->key += file.filename().string();
    co_await with_progress(ctx, "upload", progress, [&]() -> asio::awaitable<void> {
      auto r = co_await net::upload_file(*session->s3, act, file, url->bucket, url->key, diag, &progress);
      if (r) bytes = r->bytes; else failed = r.error();
    });
  } else {
    std::filesystem::path file = args.destination;
    if (std::filesystem::is_directory(file, fs_ec)) file /= std::filesystem::path(url->key).filename();
    co_await with_progress(ctx, "download", progress, [&]() -> asio::awaitable<void> {
      auto r = co_await net::download_file(*session->s3, act, url->bucket, url->key, file, diag, &progress);
      if (r) bytes = r->size; else failed = r.error();
    });
  }
  if (failed) co_return report(act, failed, diag);
  act.succeed({{"bytes", bytes}});
  co_return exit_code::success;
}

// `ferry storage gc`: what no recent manifest of the configured prefix needs, listed, or removed with --delete.
asio::awaitable<int> gc(command_context& ctx, const storage_args& args) {
  auto act = ctx.trace.child(action_types::storage::gc, {{"older_than", args.older_than}, {"delete", args.remove}});
  const auto age = config::parse_duration(args.older_than);
  if (!age || *age < std::chrono::seconds(0)) {
    print_error(fmt::format("--older-than '{}' is not a duration (such as 30d or 12h)", args.older_than));
    act.fail_exception("usage", "bad --older-than");
    co_return exit_code::usage;
  }
  diagnostics diag;
  const auto& storage = ctx.config.storage;
  if (storage.malformed()) co_return report(act, storage.refuse(diag), diag);
  if (storage.unset()) {
    diag.set("storage.url is not set: gc works on its prefix. Put storage.url = \"s3://BUCKET/PREFIX\" in ferry.toml "
             "or set FERRY_STORAGE_URL");
    co_return report(act, errc::no_storage, diag);
  }
  const auto& url = storage.url;
  auto session = open_session(ctx, diag);
  if (!session) co_return report(act, session.error(), diag);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  auto plan = co_await packaging::plan_gc(act, *session->s3, url->bucket, url->key,
                                          std::chrono::duration_cast<std::chrono::seconds>(*age), now, diag);
  if (!plan) co_return report(act, plan.error(), diag);
  const char* verb = args.remove ? "removing" : "would remove";
  for (const auto& m : plan->manifests)
    fmt::print("{} s3://{}/{}  (manifest, {})\n", verb, url->bucket, m.key, m.last_modified);
  for (const auto& z : plan->zips)
    fmt::print("{} s3://{}/{}  ({} bytes, {})\n", verb, url->bucket, z.key, z.size, z.last_modified);
  for (const auto& u : plan->uploads)
    fmt::print("{} s3://{}/{}  (multipart upload begun {})\n", args.remove ? "aborting" : "would abort", url->bucket,
               u.key, u.initiated);
  if (args.remove) {
    auto done = co_await packaging::apply_gc(act, *session->s3, url->bucket, *plan, diag);
    if (!done) co_return report(act, done.error(), diag);
  }
  fmt::print("{} {} manifests and {} objects ({:.1f} MiB), {} {} multipart uploads; kept {} live manifests and {} "
             "zips{}\n",
             args.remove ? "removed" : "would remove", plan->manifests.size(), plan->zips.size(),
             static_cast<double>(plan->bytes) / (1 << 20), args.remove ? "aborted" : "would abort",
             plan->uploads.size(), plan->live_manifests, plan->kept_zips,
             args.remove ? "" : " (--delete removes them)");
  act.succeed({{"manifests", plan->manifests.size()}, {"objects", plan->zips.size()},
               {"uploads", plan->uploads.size()}, {"bytes", plan->bytes}});
  co_return exit_code::success;
}

}  // namespace

void add_storage_commands(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<storage_args>();
  auto* storage = app.add_subcommand("storage", "look at and change objects in S3-compatible storage");
  storage->fallthrough();
  storage->require_subcommand(1);

  auto* ls_cmd = storage->add_subcommand("ls", "list the objects under s3://BUCKET/PREFIX");
  ls_cmd->fallthrough();
  ls_cmd->add_option("url", args->url, "s3://BUCKET[/PREFIX]")->required();
  ls_cmd->callback([&selected, args] {
    selected.action_type = action_types::storage::command;
    selected.run = [args](command_context& ctx) { return ls(ctx, *args); };
  });

  auto* cp_cmd = storage->add_subcommand("cp", "copy a file to s3://BUCKET/KEY, or an object to a file");
  cp_cmd->fallthrough();
  cp_cmd->add_option("source", args->source, "a local file or s3://BUCKET/KEY")->required();
  cp_cmd->add_option("destination", args->destination, "s3://BUCKET/KEY or a local path")->required();
  cp_cmd->callback([&selected, args] {
    selected.action_type = action_types::storage::command;
    selected.run = [args](command_context& ctx) { return cp(ctx, *args); };
  });

  auto* presign_cmd = storage->add_subcommand("presign", "print a presigned GET URL for s3://BUCKET/KEY");
  presign_cmd->fallthrough();
  presign_cmd->add_option("url", args->url, "s3://BUCKET/KEY")->required();
  presign_cmd->add_option("--expires", args->expires, "how long the URL works (1s to 7d)")->capture_default_str();
  presign_cmd->add_flag("--for-nodes", args->for_nodes, "name the endpoint as nodes reach it (storage.node_endpoint)");
  presign_cmd->callback([&selected, args] {
    selected.action_type = action_types::storage::command;
    selected.run = [args](command_context& ctx) { return presign(ctx, *args); };
  });

  auto* gc_cmd = storage->add_subcommand(
      "gc", "list the layers and manifests of storage.url that no manifest newer than --older-than needs, and the "
            "multipart uploads begun before it");
  gc_cmd->fallthrough();
  gc_cmd->add_option("--older-than", args->older_than,
                     "a manifest this old no longer keeps its layers; an upload begun this long ago is stale")
      ->capture_default_str();
  gc_cmd->add_flag("--delete", args->remove, "remove them (manifests first, then the layers) and abort the uploads");
  gc_cmd->callback([&selected, args] {
    selected.action_type = action_types::storage::command;
    selected.run = [args](command_context& ctx) { return gc(ctx, *args); };
  });

  auto* rm_cmd = storage->add_subcommand("rm", "delete s3://BUCKET/KEY, or everything under a prefix with -r");
  rm_cmd->fallthrough();
  rm_cmd->add_option("url", args->url, "s3://BUCKET/KEY")->required();
  rm_cmd->add_flag("-r,--recursive", args->recursive, "delete every object under the prefix");
  rm_cmd->callback([&selected, args] {
    selected.action_type = action_types::storage::command;
    selected.run = [args](command_context& ctx) { return rm(ctx, *args); };
  });
}

}  // namespace ferry::agent
