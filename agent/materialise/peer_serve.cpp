#include "agent/materialise/peer_serve.hpp"

#include "agent/error.hpp"
#include "agent/materialise/node_call.hpp"
#include "net/cancellation.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstring>

namespace ferry::agent {
namespace {

constexpr auto keep_alive = std::chrono::milliseconds(50);

// The request, then keep-alive lines until done(), then the end.
class serve_input final : public net::input_source {
 public:
  serve_input(std::string request, std::function<bool()> done) : text_(std::move(request) + "\n"), done_(std::move(done)) {}

  asio::awaitable<result<std::size_t>> read(std::span<char> into) override {
    if (offset_ == text_.size()) {
      if (done_()) co_return std::size_t{0};
      asio::steady_timer pause(co_await asio::this_coro::executor, keep_alive);
      error_code ec;
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (co_await net::cancelled()) co_return error_code(asio::error::operation_aborted);
      text_ = "\n";
      offset_ = 0;
    }
    const auto n = std::min(into.size(), text_.size() - offset_);
    std::memcpy(into.data(), text_.data() + offset_, n);
    offset_ += n;
    co_return n;
  }

 private:
  std::string text_;
  std::size_t offset_ = 0;
  std::function<bool()> done_;
};

}  // namespace

asio::awaitable<result<void>> serve_peers(tracing::action& parent, net::node_link& link,
                                          const materialise_options& options, const serve_settings& settings,
                                          std::function<void(unsigned port)> on_port, std::function<bool()> done,
                                          diagnostics& diag) {
  const auto node_name = link.node();
  auto act = parent.child(action_types::agent::serve, {{"node", node_name}, {"bind", settings.bind}});
  node_call call{options.program, options.cache_dir, options.node_path, "serve", action_types::node::serve, {}};
  call.on_message = [&on_port](const boost::json::object& m) {
    const auto* type = m.if_contains("message_type");
    if (!type || !type->is_string() || type->get_string() != action_types::node::listening) return;
    if (const auto* port = m.if_contains("port"); port && port->is_int64()) on_port(static_cast<unsigned>(port->get_int64()));
  };
  node::serve_request request;
  request.cache_dir = options.cache_dir;
  request.serve_id = settings.serve_id;
  request.token = settings.token;
  request.bind = settings.bind;
  request.wait_ms = settings.wait_ms;
  request.limits = options.limits;
  auto trace = node_trace(act, node_name);
  auto answer = co_await call_node(
      act, link, call,
      [&](const std::string& task_id) {
        request.task_id = task_id;
        return std::make_unique<serve_input>(node::serve_request_line(request), done);
      },
      *trace, diag);
  if (!answer) {
    act.fail(answer.error(), diag);
    co_return answer.error();
  }
  if (!answer->succeeded()) {
    const auto ec = node_failure(*answer, node_name, make_error_code(errc::materialise_failed), diag);
    act.fail(ec, diag);
    co_return ec;
  }
  act.succeed({{"served", end_text(*answer, "served")}, {"bytes", end_text(*answer, "bytes")}});
  co_return result<void>{};
}

}  // namespace ferry::agent
