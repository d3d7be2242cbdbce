#include "agent/materialise/stage.hpp"

#include "agent/error.hpp"
#include "agent/node/entry_name.hpp"
#include "agent/materialise/node_call.hpp"
#include "config/s3_url.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <chrono>

namespace ferry::agent {

namespace {

std::string unquoted(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

}  // namespace

result<stage_spec> parse_stage_spec(std::string_view text, diagnostics& diag) {
  const auto eq = text.rfind('=');
  if (!text.starts_with("s3://") || eq == std::string_view::npos) {
    diag.set(fmt::format("--stage {}: give s3://BUCKET/PREFIX=NODE_DIR", text));
    return error_code(errc::bad_stage);
  }
  stage_spec spec;
  spec.node_dir = std::string(text.substr(eq + 1));
  if (spec.node_dir.empty() || spec.node_dir.front() != '/' || spec.node_dir.find('\n') != std::string::npos) {
    diag.set(fmt::format("--stage {}: the node directory must be an absolute path", text));
    return error_code(errc::bad_stage);
  }
  while (spec.node_dir.size() > 1 && spec.node_dir.back() == '/') spec.node_dir.pop_back();
  auto url = config::parse_s3_url(text.substr(0, eq), diag);
  if (!url) {
    diag.set(fmt::format("--stage {}: {}", text, diag.message));
    return error_code(errc::bad_stage);
  }
  spec.bucket = url->bucket;
  spec.prefix = url->key;
  return spec;
}

stage_options stage_options::from(const config::settings& s) {
  stage_options o;
  o.limits = limits_of(s);
  o.limits.parallelism = std::max(1, s.agent.stage_parallelism);
  return o;
}

asio::awaitable<result<stage_plan>> plan_stage(tracing::action& parent, net::s3_client& s3, const stage_spec& spec,
                                               std::uint64_t window, diagnostics& diag) {
  auto act = parent.child(action_types::agent::stage_plan, {{"bucket", spec.bucket}, {"prefix", spec.prefix}});
  stage_plan plan;
  plan.source = fmt::format("s3://{}/{}", spec.bucket, spec.prefix);
  plan.node_dir = spec.node_dir;
  plan.window = window;
  auto listed = co_await s3.list_objects(act, spec.bucket, spec.prefix, diag);
  if (!listed) {
    act.fail(listed.error(), diag);
    co_return listed.error();
  }
  std::uint64_t largest = 0;
  for (const auto& o : *listed) {
    if (o.key.ends_with('/')) continue;  // a "directory" placeholder
    std::string path = o.key.substr(spec.prefix.size());
    while (path.starts_with('/')) path.erase(0, 1);
    // The node refuses what cannot be a file under its directory: said here first, naming the object.
    diagnostics why;
    const auto where = node::split_entry_name(path, plan.source, why);
    const bool own = path.starts_with(".ferry-stage");
    if (!where || where->directory || own || path.find('\n') != std::string::npos) {
      diag.set(fmt::format("{}: the object {} cannot be a file under {}", plan.source, node::printable_name(o.key),
                           plan.node_dir));
      act.fail(errc::bad_stage, diag);
      co_return error_code(errc::bad_stage);
    }
    plan.objects.push_back({std::move(path), s3.presign_get(spec.bucket, o.key), o.size, unquoted(o.etag)});
    plan.bytes += o.size;
    largest = std::max(largest, o.size);
  }
  if (plan.objects.empty()) {
    diag.set(fmt::format("--stage {}: no objects there", plan.source));
    act.fail(errc::bad_stage, diag);
    co_return error_code(errc::bad_stage);
  }
  if (window > 0 && largest > window) {
    diag.set(fmt::format("--stage-window {} bytes is smaller than the largest object under {} ({} bytes)", window,
                         plan.source, largest));
    act.fail(errc::bad_stage, diag);
    co_return error_code(errc::bad_stage);
  }
  act.succeed({{"objects", plan.objects.size()}, {"bytes", plan.bytes}});
  co_return plan;
}

result<void> order_stage(stage_plan& plan, std::string_view prefix, std::string_view order_text,
                         std::string_view file, diagnostics& diag) {
  std::unordered_map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < plan.objects.size(); ++i) index.emplace(plan.objects[i].path, i);
  std::vector<bool> placed(plan.objects.size(), false);
  std::vector<stage_object> ordered;
  std::size_t line_number = 0;
  while (!order_text.empty()) {
    const auto nl = order_text.find('\n');
    auto line = order_text.substr(0, nl);
    order_text.remove_prefix(nl == std::string_view::npos ? order_text.size() : nl + 1);
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (!prefix.empty() && line.starts_with(prefix)) line.remove_prefix(prefix.size());
    while (line.starts_with('/')) line.remove_prefix(1);
    const auto it = index.find(line);
    if (it == index.end()) {
      diag.set(fmt::format("{}:{}: no object {} under {}", file, line_number, line, plan.source));
      return error_code(errc::bad_stage);
    }
    if (placed[it->second]) {
      diag.set(fmt::format("{}:{}: {} is named twice", file, line_number, line));
      return error_code(errc::bad_stage);
    }
    placed[it->second] = true;
    ordered.push_back(plan.objects[it->second]);
  }
  for (std::size_t i = 0; i < plan.objects.size(); ++i) {
    if (!placed[i]) ordered.push_back(std::move(plan.objects[i]));
  }
  plan.objects = std::move(ordered);
  return {};
}

asio::awaitable<result<stage_result>> stage(tracing::action& parent, net::node_link& link,
                                            const stage_plan& plan, const stage_options& options, diagnostics& diag) {
  co_await asio::this_coro::throw_if_cancelled(false);
  auto act = parent.child(action_types::agent::stage, {{"node", link.node()}, {"source", plan.source},
                                                       {"node_dir", plan.node_dir}, {"objects", plan.objects.size()},
                                                       {"bytes", plan.bytes}, {"window", plan.window}});
  auto fail = [&](error_code ec) {
    act.fail(ec, diag);
    return result<stage_result>(boost::system::in_place_error, ec);
  };
  const auto begin = std::chrono::steady_clock::now();
  const node_call call{options.program, options.cache_dir, options.node_path, "stage", action_types::node::stage};
  node::stage_request request{{}, plan.source, plan.node_dir, plan.window, options.limits, plan.objects,
                              options.tenant};
  auto trace = node_trace(act, link.node());
  auto answer = co_await call_node(act, link, call, text_input([&](const std::string& task_id) {
                                     request.task_id = task_id;
                                     return node::stage_lines(request);
                                   }),
                                   *trace, diag);
  if (!answer) co_return fail(answer.error());
  if (!answer->succeeded()) {
    diagnostics why;
    const auto ec = node_failure(*answer, link.node(), make_error_code(errc::stage_failed), why);
    diag.set(fmt::format("staging {} {}", plan.source, why.message));
    co_return fail(ec);
  }
  stage_result got{end_count(*answer, "fetched"), end_count(*answer, "kept"), end_count(*answer, "bytes_fetched")};
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  act.succeed({{"fetched", got.fetched},
               {"kept", got.kept},
               {"bytes_fetched", got.bytes},
               {"seconds", seconds},
               {"mb_per_s", seconds > 0 ? static_cast<double>(got.bytes) / seconds / 1e6 : 0.0}});
  co_return got;
}

}  // namespace ferry::agent
