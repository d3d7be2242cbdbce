#include "agent/materialise/node_call.hpp"

#include "agent/error.hpp"
#include "agent/node/error.hpp"
#include "net/error.hpp"
#include "tracing/action_types.hpp"
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

// What the node program's stdout says as it arrives: each line goes to the node's trace file, and the
// end of its root action is kept.
class node_program_output final : public net::output_sink {
 public:
  node_program_output(tracing::sink& out, const node_call& call, node_answer& answer)
      : out_(out), root_type_(call.root_type), on_message_(call.on_message), answer_(answer) {}

  asio::awaitable<error_code> write(net::output_stream stream, std::span<const char> bytes) override {
    const std::string_view text(bytes.data(), bytes.size());
    if (stream == net::output_stream::err) {
      auto& err = answer_.err;
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

 private:
  void take(std::string_view line) {
    if (line.empty()) return;
    out_.write(line);
    json::error_code ec;
    auto value = json::parse(line, ec);
    if (ec || !value.is_object()) return;
    auto& o = value.get_object();
    if (on_message_) on_message_(o);
    const auto* type = o.if_contains("action_type");
    const auto* status = o.if_contains("action_status");
    if (type && status && type->is_string() && type->get_string() == root_type_ && status->is_string() &&
        status->get_string() != "started")
      answer_.end = std::move(o);
  }

  tracing::sink& out_;
  std::string_view root_type_;
  const std::function<void(const json::object&)>& on_message_;
  node_answer& answer_;
  std::string pending_;
};

// A buffer_source that owns its bytes.
class text_source final : public net::input_source {
 public:
  explicit text_source(std::string text) : text_(std::move(text)), source_(text_) {}
  asio::awaitable<result<std::size_t>> read(std::span<char> into) override { return source_.read(into); }

 private:
  std::string text_;
  net::buffer_source source_;
};

result<void> check_program(const node_call& call, diagnostics& diag) {
  if (call.program) return {};
  diag.set("no node program was loaded");
  return make_error_code(errc::node_lacks_tools);
}

bool missing(const node_answer& a) { return a.exit.status == 127 && a.err.find(missing_marker) != std::string::npos; }

}  // namespace

std::chrono::milliseconds node_shutdown_grace(const config::settings& settings) {
  // Half of the shorter wait: ferry's own grace before it cuts the clean-up off, and ssh.kill_grace before
  // KILL. The other half carries the node program's last lines to ferry and lets it exit.
  const auto shorter = std::min(settings.agent.shutdown_grace, settings.ssh.kill_grace);
  return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(shorter) / 2);
}

node::node_limits limits_of(const config::settings& settings) {
  node::node_limits l;
  l.connect_timeout_ms = settings.net.connect_timeout.count();
  l.read_timeout_ms = settings.agent.download_timeout.count();
  l.lock_timeout_ms = settings.agent.cache_lock_timeout.count();
  l.attempts = std::max(1, settings.net.retry.max_attempts);
  l.retry_base_ms = settings.net.retry.base_delay.count();
  l.retry_max_ms = settings.net.retry.max_delay.count();
  l.shutdown_grace_ms = node_shutdown_grace(settings).count();
  return l;
}

bool node_answer::succeeded() const { return exit.success() && end && end_text(*this, "action_status") == "succeeded"; }

std::string end_text(const node_answer& answer, std::string_view key) {
  const auto* v = answer.end ? answer.end->if_contains(key) : nullptr;
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::uint64_t end_count(const node_answer& answer, std::string_view key) {
  const auto* v = answer.end ? answer.end->if_contains(key) : nullptr;
  if (!v) return 0;
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64()) return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v->get_int64()));
  return 0;
}

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

node_input text_input(std::function<std::string(const std::string& task_id)> text) {
  return [text = std::move(text)](const std::string& task_id) -> std::unique_ptr<net::input_source> {
    return std::make_unique<text_source>(text(task_id));
  };
}

asio::awaitable<result<node_answer>> call_node(tracing::action& act, net::node_link& link, const node_call& call,
                                               const node_input& input, tracing::sink& trace, diagnostics& diag) {
  if (auto ok = check_program(call, diag); !ok) co_return ok.error();
  const auto command = node_program_command(*call.program, call.cache_dir, call.subcommand, call.node_path);
  for (int round = 0;; ++round) {
    const auto task_id = act.serialize_task_id();
    auto in = input(task_id);
    node_answer answer;
    node_program_output out(trace, call, answer);
    net::exec_request request{command, in.get(), &out};
    auto done = co_await link.exec(act, request, diag);
    if (!done) co_return done.error();
    answer.exit = *done;
    if (round > 0 || !missing(answer)) co_return answer;
    diagnostics ignored;
    if (auto level = tracing::parse_task_id(task_id, ignored)) {
      auto absent = tracing::action::continue_task(act.output(), *level, action_types::node::absent);
      absent.succeed();
    }
    if (auto installed = co_await install_node_program(act, link, *call.program, call.cache_dir, call.node_path,
                                                        diag);
        !installed)
      co_return installed.error();
  }
}

asio::awaitable<result<void>> ensure_node_program(tracing::action& act, net::node_link& link,
                                                  const node_call& call, diagnostics& diag) {
  if (auto ok = check_program(call, diag); !ok) co_return ok.error();
  net::collect_sink out(64 << 10);
  net::exec_request probe{node_program_command(*call.program, call.cache_dir, "version", call.node_path), nullptr,
                          &out};
  auto done = co_await link.exec(act, probe, diag);
  if (!done) co_return done.error();
  if (done->success()) co_return result<void>{};
  if (done->status == 127 && out.err.find(missing_marker) != std::string::npos)
    co_return co_await install_node_program(act, link, *call.program, call.cache_dir, call.node_path, diag);
  diag.set(fmt::format("the node program on {} does not run ({}): {}", link.node(), done->describe(), out.err));
  co_return make_error_code(errc::node_lacks_tools);
}

error_code node_failure(const node_answer& answer, std::string_view node, error_code fallback, diagnostics& diag) {
  std::string reason;
  error_code ec = fallback;
  if (answer.end) {
    reason = end_text(answer, "reason");
    // The failed action names its error as "<category>:<value>": the node's own and net's are ours too.
    const auto exception = end_text(answer, "exception");
    const auto colon = exception.rfind(':');
    const auto category = exception.substr(0, colon == std::string::npos ? 0 : colon);
    const int value = colon == std::string::npos ? 0 : std::atoi(exception.c_str() + colon + 1);
    if (value > 0 && category == node::category().name()) ec = node::make_error_code(static_cast<node::errc>(value));
    if (value > 0 && category == net::category().name()) ec = net::make_error_code(static_cast<net::errc>(value));
  }
  if (reason.empty()) {
    reason = answer.err;
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
  }
  diag.set(fmt::format("on {}: {}", node, reason.empty() ? "the node program " + answer.exit.describe() : reason));
  return ec;
}

}  // namespace ferry::agent
