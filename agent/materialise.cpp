#include "agent/materialise.hpp"

#include "agent/error.hpp"
#include "agent/node/action_types.hpp"
#include "agent/node/error.hpp"
#include "net/error.hpp"
#include "net/ssh_exec.hpp"
#include "net/ssh_streams.hpp"
#include "tracing/sink.hpp"
#include "tracing/task_id.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>

namespace ferry::agent {
namespace {

namespace json = boost::json;

constexpr std::size_t max_line = 1 << 20;
constexpr std::size_t max_stderr = 16 << 10;

// The node's own trace file, beside ferry's: <dir>/<stem>.node-<node>-<n>.jsonl. A discarded trace (no
// file) discards the node's too.
std::unique_ptr<tracing::sink> node_trace(const tracing::action& act, std::string_view node) {
  static std::atomic<unsigned> counter{0};
  const auto& ours = act.output().path();
  if (ours.empty()) return tracing::sink::discard();
  std::string safe;
  for (char c : node) safe.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_');
  const auto path = ours.parent_path() / fmt::format("{}.node-{}-{}.jsonl", ours.stem().string(), safe, counter++);
  diagnostics ignored;
  auto opened = tracing::sink::open(path, ignored);
  return opened ? std::move(*opened) : tracing::sink::discard();
}

// What the node program's stdout says as it arrives: each line goes to the node's trace file, and the
// end of its root action is kept.
class node_output final : public net::output_sink {
 public:
  explicit node_output(tracing::sink& out) : out_(out) {}

  asio::awaitable<error_code> write(net::output_stream stream, std::span<const char> bytes) override {
    const std::string_view text(bytes.data(), bytes.size());
    if (stream == net::output_stream::err) {
      err.append(text);
      if (err.size() > 2 * max_stderr) err.erase(0, err.size() - max_stderr);
      co_return error_code{};
    }
    pending_.append(text);
    std::size_t start = 0;
    for (auto nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n', start)) {
      take(std::string_view(pending_).substr(start, nl - start));
      start = nl + 1;
    }
    pending_.erase(0, start);
    if (pending_.size() > max_line) pending_.clear();  // no message is that long: drop, never grow
    co_return error_code{};
  }

  std::optional<json::object> end;  // the root action's end message

 private:
  void take(std::string_view line) {
    if (line.empty()) return;
    out_.write(line);
    json::error_code ec;
    auto value = json::parse(line, ec);
    if (ec || !value.is_object()) return;
    auto& o = value.get_object();
    const auto* type = o.if_contains("action_type");
    const auto* status = o.if_contains("action_status");
    if (type && status && type->is_string() && type->get_string() == node::action_types::materialise &&
        status->is_string() &&
        status->get_string() != "started")
      end = std::move(o);
  }

 public:
  std::string err;

 private:
  tracing::sink& out_;
  std::string pending_;
};

std::string string_of(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::uint64_t count_of(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v) return 0;
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64()) return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v->get_int64()));
  return 0;
}

result<environment> environment_of(const json::object& end, std::size_t layers, diagnostics& diag) {
  environment env;
  env.workdir = string_of(end, "workdir");
  if (const auto* path = end.if_contains("python_path"); path && path->is_array()) {
    for (const auto& p : path->get_array())
      if (p.is_string()) env.python_path.emplace_back(p.get_string());
  }
  if (env.python_path.size() != layers) {
    diag.set(fmt::format("the node program reported {} layer directories for a plan of {}", env.python_path.size(),
                         layers));
    return make_error_code(errc::materialise_failed);
  }
  env.layers_cached = count_of(end, "layers_cached");
  env.layers_fetched = count_of(end, "layers_fetched");
  env.bytes_fetched = count_of(end, "bytes_fetched");
  env.layers_evicted = count_of(end, "layers_evicted");
  return env;
}

// The node program's failure as an error: its reason (from its root action's end, else its stderr),
// under the node's own error code when the trace names one of ours.
error_code failure_of(const node_output& out, const net::exit_info& exit, std::string_view node, diagnostics& diag) {
  std::string reason;
  error_code ec = make_error_code(errc::materialise_failed);
  if (out.end) {
    reason = string_of(*out.end, "reason");
    // The failed action names its error as "<category>:<value>": the node's own and net's are ours too.
    const auto exception = string_of(*out.end, "exception");
    const auto colon = exception.rfind(':');
    const auto category = exception.substr(0, colon == std::string::npos ? 0 : colon);
    const int value = colon == std::string::npos ? 0 : std::atoi(exception.c_str() + colon + 1);
    if (value > 0 && category == node::category().name()) ec = node::make_error_code(static_cast<node::errc>(value));
    if (value > 0 && category == net::category().name()) ec = net::make_error_code(static_cast<net::errc>(value));
  }
  if (reason.empty()) {
    reason = out.err;
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
  }
  diag.set(fmt::format("on {}: {}", node, reason.empty() ? "the node program " + exit.describe() : reason));
  return ec;
}

// Runs `ferry-node version` on the node, and installs the program when that finds it missing.
asio::awaitable<result<void>> ensure_program(tracing::action& act, net::ssh_session& session,
                                             const materialise_options& options, diagnostics& diag) {
  net::collect_sink out(64 << 10);
  net::exec_request probe{node_program_command(*options.program, options.cache_dir, "version", options.node_path),
                          nullptr, &out};
  auto done = co_await net::exec(act, session, probe, diag);
  if (!done) co_return done.error();
  if (done->success()) co_return result<void>{};
  if (done->status == 127 && out.err.find(missing_marker) != std::string::npos)
    co_return co_await install_node_program(act, session, *options.program, options.cache_dir, options.node_path,
                                            diag);
  diag.set(fmt::format("the node program on {} does not run ({}): {}", session.peer().node, done->describe(), out.err));
  co_return make_error_code(errc::node_lacks_tools);
}

}  // namespace

materialise_options materialise_options::from(const config::settings& settings) {
  materialise_options o;
  auto& l = o.limits;
  l.connect_timeout_ms = settings.net.connect_timeout.count();
  l.read_timeout_ms = settings.agent.download_timeout.count();
  l.lock_timeout_ms = settings.agent.cache_lock_timeout.count();
  l.attempts = std::max(1, settings.net.retry.max_attempts);
  l.retry_base_ms = settings.net.retry.base_delay.count();
  l.retry_max_ms = settings.net.retry.max_delay.count();
  l.parallelism = std::max(1, settings.agent.download_parallelism);
  l.range_size = std::max<std::uint64_t>(settings.agent.download_range.bytes, 64 << 10);
  l.max_shard_content = settings.agent.max_shard_content.bytes;
  o.cache_cap = settings.nodes.cache_size.bytes;
  return o;
}

asio::awaitable<result<environment>> materialise(tracing::action& parent, net::ssh_session& session,
                                                 const environment_plan& plan, const materialise_options& options,
                                                 diagnostics& diag) {
  co_await asio::this_coro::throw_if_cancelled(false);
  if (auto checked = node::check_plan(plan, diag); !checked) {
    auto act = parent.child("ferry:materialise", {{"node", session.peer().node}, {"layers", plan.layers.size()}});
    act.fail(checked.error(), diag);
    co_return checked.error();
  }
  auto feed = layer_feed::of(co_await asio::this_coro::executor, plan);
  auto o = options;
  o.cache_dir = plan.cache_dir;
  o.cache_cap = plan.cache_cap;
  co_return co_await materialise(parent, session, *feed, o, diag);
}

asio::awaitable<result<environment>> materialise(tracing::action& parent, net::ssh_session& session,
                                                 layer_feed& feed, const materialise_options& options,
                                                 diagnostics& diag) {
  co_await asio::this_coro::throw_if_cancelled(false);
  const auto node_name = session.peer().node;
  auto act = parent.child("ferry:materialise", {{"node", node_name}});
  auto fail = [&](error_code ec) {
    act.fail(ec, diag);
    return result<environment>(boost::system::in_place_error, ec);
  };
  if (!options.program) {
    diag.set("no node program was loaded");
    co_return fail(make_error_code(errc::node_lacks_tools));
  }
  node::plan_header header{options.cache_dir, options.cache_cap, {}, options.limits};
  const auto command = node_program_command(*options.program, options.cache_dir, "materialise", options.node_path);
  // While the feed is open, exec waits for its lines without watching the command: a node that lacks the
  // program would only be found out when the pack ends. So then the program is made sure of first.
  if (!feed.ended()) {
    if (auto present = co_await ensure_program(act, session, options, diag); !present) co_return fail(present.error());
  }
  auto trace = node_trace(act, node_name);
  for (int round = 0;; ++round) {
    header.task_id = act.serialize_task_id();
    auto input = feed.reader(node::header_line(header));
    node_output out(*trace);
    net::exec_request request{command, input.get(), &out};
    auto done = co_await net::exec(act, session, request, diag);
    if (!done) co_return fail(done.error());
    if (done->success() && out.end && string_of(*out.end, "action_status") == "succeeded") {
      auto env = environment_of(*out.end, feed.layers(), diag);
      if (!env) co_return fail(env.error());
      act.succeed({{"workdir", env->workdir},
                   {"layers_cached", env->layers_cached},
                   {"layers_fetched", env->layers_fetched},
                   {"bytes_fetched", env->bytes_fetched},
                   {"layers_evicted", env->layers_evicted}});
      co_return std::move(*env);
    }
    const bool missing = done->status == 127 && out.err.find(missing_marker) != std::string::npos;
    if (missing && round == 0) {
      // The level handed to a program that was not there holds one action saying so, so that the task
      // has no hole in it.
      diagnostics ignored;
      if (auto level = tracing::parse_task_id(header.task_id, ignored)) {
        auto absent = tracing::action::continue_task(act.output(), *level, node::action_types::absent);
        absent.succeed();
      }
      if (auto installed = co_await install_node_program(act, session, *options.program, options.cache_dir,
                                                          options.node_path, diag);
          !installed)
        co_return fail(installed.error());
      continue;
    }
    co_return fail(failure_of(out, *done, node_name, diag));
  }
}

}  // namespace ferry::agent
