#include "agent/stage.hpp"

#include "agent/error.hpp"
#include "net/s3_url.hpp"
#include "net/ssh_exec.hpp"
#include "net/ssh_quote.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <chrono>

namespace ferry::agent {

namespace {

constexpr std::string_view script_body =
#include "agent/stage_script.inc"
    ;

// Seconds for curl, at least 1.
long whole_seconds(config::duration d) {
  return std::max<long>(1, static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(d).count()));
}

// A value inside double quotes in a curl config file (curl -K): backslash and quote escaped.
std::string curl_config_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::string unquoted(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

// Splits stdout into lines and counts what the node reports; the last failure line is kept.
class stage_sink final : public net::output_sink {
 public:
  asio::awaitable<error_code> write(net::output_stream stream, std::span<const char> bytes) override {
    const std::string_view text(bytes.data(), bytes.size());
    if (stream == net::output_stream::err) {
      if (err.size() < 16384) err.append(text);
      co_return error_code{};
    }
    pending_.append(text);
    std::size_t nl;
    while ((nl = pending_.find('\n')) != std::string::npos) {
      line(std::string_view(pending_).substr(0, nl));
      pending_.erase(0, nl + 1);
    }
    co_return error_code{};
  }

  stage_result result;
  std::string failure;
  bool done = false;
  std::string err;

 private:
  void line(std::string_view l) {
    if (l.starts_with("@ferry kept ")) {
      ++result.kept;
    } else if (l.starts_with("@ferry fetched ")) {
      ++result.fetched;
      const auto rest = l.substr(15);
      result.bytes += std::strtoull(std::string(rest.substr(0, rest.find(' '))).c_str(), nullptr, 10);
    } else if (l.starts_with("@ferry fail ")) {
      failure = std::string(l.substr(12));
    } else if (l == "@ferry done") {
      done = true;
    }
  }
  std::string pending_;
};

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
  auto url = net::parse_s3_url(text.substr(0, eq), diag);
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
  o.connect_timeout = s.net.connect_timeout;
  o.download_timeout = s.agent.download_timeout;
  o.attempts = std::max(1, s.net.retry.max_attempts);
  o.parallel = std::max(1, s.agent.stage_parallelism);
  return o;
}

asio::awaitable<result<stage_plan>> plan_stage(tracing::action& parent, net::s3_client& s3, const stage_spec& spec,
                                               std::uint64_t window, diagnostics& diag) {
  auto act = parent.child("ferry:stage:plan", {{"bucket", spec.bucket}, {"prefix", spec.prefix}});
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
    if (path.empty() || path.find('\n') != std::string::npos || path == ".." || path.starts_with("../") ||
        path.find("/../") != std::string::npos || path.starts_with(".ferry-stage")) {
      diag.set(fmt::format("{}: the object {} cannot be a file under {}", plan.source, o.key, plan.node_dir));
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

std::string stage_script(const stage_plan& plan, const stage_options& options) {
  std::string s;
  s += fmt::format("dir={}\nbatch_c={}\nwindow={}\nparallel={}\nconnect_timeout={}\nmax_time={}\nattempts={}\n"
                   "count={}\n",
                   net::shell_quote(plan.node_dir),
                   net::shell_quote(curl_config_value(plan.node_dir + "/.ferry-stage/tmp/batch.")) + "$$",
                   plan.window ? std::to_string(plan.window) : std::string("''"),
                   options.parallel, whole_seconds(options.connect_timeout), whole_seconds(options.download_timeout),
                   std::max(0, options.attempts - 1), plan.objects.size());
  for (std::size_t i = 0; i < plan.objects.size(); ++i) {
    const auto& o = plan.objects[i];
    s += fmt::format("p_{0}={1} c_{0}={2} s_{0}={3} e_{0}={4} u_{0}={5}\n", i, net::shell_quote(o.path),
                     net::shell_quote(curl_config_value(o.path)), o.size, net::shell_quote(o.etag),
                     net::shell_quote(o.url));
  }
  s += script_body;
  return s;
}

asio::awaitable<result<stage_result>> stage(tracing::action& parent, net::ssh_session& session,
                                            const stage_plan& plan, const stage_options& options, diagnostics& diag) {
  co_await asio::this_coro::throw_if_cancelled(false);
  auto act = parent.child("ferry:stage", {{"node", session.peer().node}, {"source", plan.source},
                                          {"node_dir", plan.node_dir}, {"objects", plan.objects.size()},
                                          {"bytes", plan.bytes}, {"window", plan.window}});
  const auto begin = std::chrono::steady_clock::now();
  const auto script = stage_script(plan, options);
  net::buffer_source input(script);
  stage_sink sink;
  net::exec_request request{"sh -s", &input, &sink};
  auto done = co_await net::exec(act, session, request, diag);
  if (!done) {
    act.fail(done.error(), diag);
    co_return done.error();
  }
  if (!done->success() || !sink.done) {
    diag.set(fmt::format("staging {} on node {}: {}", plan.source, session.peer().node,
                         !sink.failure.empty() ? sink.failure
                                               : fmt::format("{} ({})", done->describe(), sink.err)));
    act.fail(errc::stage_failed, diag);
    co_return error_code(errc::stage_failed);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  act.succeed({{"fetched", sink.result.fetched},
               {"kept", sink.result.kept},
               {"bytes_fetched", sink.result.bytes},
               {"seconds", seconds},
               {"mb_per_s", seconds > 0 ? static_cast<double>(sink.result.bytes) / seconds / 1e6 : 0.0}});
  co_return sink.result;
}

}  // namespace ferry::agent
