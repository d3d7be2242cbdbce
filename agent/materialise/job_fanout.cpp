#include "agent/materialise/job_fanout.hpp"

#include "agent/materialise/peer_serve.hpp"
#include "net/cancellation.hpp"
#include "net/digest.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <boost/asio/ip/address.hpp>
#include <fmt/format.h>

#include <array>
#include <stdexcept>

namespace ferry::agent {
namespace {

// Only an IP address is served on: the server binds to it, and the peers reach it there.
bool is_address(const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

bool job_fanout::wanted(const config::nodes_settings& settings, std::size_t count) {
  return settings.fanout && count > static_cast<std::size_t>(settings.fanout_min);
}

job_fanout::job_fanout(const config::nodes_settings& settings, std::size_t expected, layer_feed& feed)
    : plan_(static_cast<std::size_t>(std::max(1, settings.fanout_seeds)),
            static_cast<std::size_t>(std::max(1, settings.fanout_degree)), expected),
      feed_(feed),
      token_(net::random_hex(32)),
      serve_id_(net::random_hex(8)),
      wait_(std::chrono::duration_cast<std::chrono::milliseconds>(settings.fanout_wait)),
      hold_(std::chrono::duration_cast<std::chrono::milliseconds>(settings.fanout_hold)) {}

job_fanout::arrival job_fanout::arrive(const provision::node& n) {
  const auto place = plan_.arrive(n.id);
  auto source = plan_.source_of(n.id);
  arrival a;
  a.held = place.parent && serves_[*place.parent] && source.empty();
  feed_.fan_out(n.id, std::move(source), a.held);
  a.serves = serves_[n.id] = place.serves && is_address(n.host);
  a.role = fanout_role{token_, a.serves ? serve_id_ : std::string()};
  return a;
}

void job_fanout::listening(const provision::node& n, unsigned port) {
  const auto url = n.host.find(':') != std::string::npos ? fmt::format("http://[{}]:{}", n.host, port)
                                                          : fmt::format("http://{}:{}", n.host, port);
  plan_.serving(n.id, url);
  // Children that arrived before their parent listened learn of it now, through their feed.
  for (const auto& child : plan_.children_of(n.id)) {
    feed_.fan_out(child, url, false);
    end_hold(child);
  }
}

void job_fanout::end_hold(const std::string& node) {
  if (auto it = holds_.find(node); it != holds_.end()) it->second->cancel();
}

boost::asio::awaitable<void> job_fanout::stop_holding_after_limit(const std::string& node) {
  co_await net::accept_cancellation();
  if (!feed_.held(node)) co_return;
  const auto executor = co_await boost::asio::this_coro::executor;
  boost::asio::steady_timer timer(executor, hold_);
  holds_[node] = &timer;
  boost::system::error_code ec;
  co_await timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  holds_.erase(node);
  feed_.release(node);  // when still held
}

void job_fanout::stopped_serving(const std::string& node) {
  serves_[node] = false;
  plan_.serving(node, "");  // children that come later go to storage
  for (const auto& child : plan_.children_of(node)) {
    feed_.release(child);
    end_hold(child);
  }
}

boost::asio::awaitable<void> job_fanout::serve(tracing::action& act, ready_node& node,
                                               const materialise_options& options, const bool& steps_over) {
  serve_settings settings{serve_id_, token_, node.node.host, wait_.count()};
  std::optional<std::chrono::steady_clock::time_point> over_at;
  const auto id = node.node.id;
  auto done = [&]() {
    if (work_over_) return true;
    if (!steps_over) return false;
    if (plan_.children_settled(id)) return true;
    const auto now = std::chrono::steady_clock::now();
    if (!over_at) over_at = now;
    return now - *over_at >= wait_;
  };
  diagnostics diag;
  // A server that fails leaves its children to storage: the failure is in the trace, the job goes on.
  (void)co_await serve_peers(act, *node.link, options, settings,
                             [&](unsigned port) { listening(node.node, port); }, done, diag);
  stopped_serving(id);
}

}  // namespace ferry::agent
