#include "agent/materialise/layer_feed.hpp"

#include "net/cancellation.hpp"
#include "net/deadline.hpp"

#include <algorithm>
#include <cstring>

namespace ferry::agent {

namespace asio = boost::asio;

class layer_feed::feed_reader final : public net::input_source {
 public:
  feed_reader(layer_feed& feed, std::string header, std::string node, bool lazy)
      : feed_(feed), current_(std::move(header) + "\n"), node_(std::move(node)), lazy_(lazy) {}

  asio::awaitable<result<std::size_t>> read(std::span<char> into) override {
    for (;;) {
      if (offset_ < current_.size()) {
        const auto n = std::min(into.size(), current_.size() - offset_);
        std::memcpy(into.data(), current_.data() + offset_, n);
        offset_ += n;
        co_return n;
      }
      if (told_done_) co_return std::size_t{0};
      // Looked up again on every turn: the feed changes it, and wakes this reader then.
      const auto& state = feed_.state_of(node_);
      if (!state.source.empty() && !told_source_) {
        current_ = node::peer_line({state.source}) + "\n";
        offset_ = 0;
        told_source_ = true;
        continue;
      }
      if (lazy_ && state.work_done) {
        current_ = node::work_done_line() + "\n";
        offset_ = 0;
        told_done_ = true;
        continue;
      }
      // A fan-out child whose parent's server is on its way holds its layers back until it is there.
      const bool hold = state.held;
      if (!hold && next_ < feed_.lines_.size()) {
        current_ = feed_.lines_[next_++];
        offset_ = 0;
        continue;
      }
      // A lazy start's input stays open after the plan's end, until the work is done.
      if (!hold && feed_.closed_ && !(lazy_ && feed_.ended_)) co_return std::size_t{0};
      const auto seen = feed_.changed_.notifications();
      if (lazy_) {
        // A lazy start: exec reads the node program's output only between reads of its input, and the
        // line saying the command may start must not wait for the next layer. So the wait is cut short by
        // an empty line (the node program skips it), soon after a line came, more rarely as time goes by.
        error_code ec;  // a wake and a cancellation look alike here: notifications() and cancelled() tell
        const bool woken = co_await net::with_deadline(feed_.changed_.wait(ec), pause_);
        if (co_await net::cancelled()) co_return error_code(asio::error::operation_aborted);
        if (!woken && feed_.changed_.notifications() == seen) {
          pause_ = std::min(pause_ * 2, max_pause);
          current_ = "\n";
          offset_ = 0;
        } else {
          pause_ = min_pause;
        }
        continue;
      }
      // Wait for the next line. A wake is told from a cancellation by the notifications it moved on.
      error_code ec;
      co_await feed_.changed_.wait(ec);
      // A cancellation may come with a wake in the same turn, so it is asked for too.
      // (Not `a || co_await b`: GCC 12 miscompiles co_await in a short-circuit operand.)
      const bool stopped = co_await net::cancelled();
      if (feed_.changed_.notifications() == seen || stopped) co_return error_code(asio::error::operation_aborted);
    }
  }

 private:
  layer_feed& feed_;
  std::string current_;
  std::size_t offset_ = 0;
  std::size_t next_ = 0;
  std::string node_;
  bool lazy_;
  bool told_done_ = false;
  bool told_source_ = false;
  static constexpr std::chrono::milliseconds min_pause{10}, max_pause{200};
  std::chrono::milliseconds pause_ = min_pause;
};

layer_feed::layer_feed(asio::any_io_executor io) : changed_(std::move(io)) {}

std::unique_ptr<layer_feed> layer_feed::of(asio::any_io_executor io, const node::environment_plan& plan) {
  auto feed = std::make_unique<layer_feed>(std::move(io));
  for (std::size_t i = 0; i < plan.layers.size(); ++i) feed->add(i, plan.layers[i]);
  feed->end(plan.layers.size(), plan.workspace);
  return feed;
}

void layer_feed::wake() { changed_.notify(); }

void layer_feed::site(const node::plan_site& site) {
  if (closed_) return;
  lines_.push_back(node::site_line(site) + "\n");
  wake();
}

void layer_feed::catalogue(const node::plan_catalogue& catalogue) {
  if (closed_) return;
  lines_.push_back(node::catalogue_line(catalogue) + "\n");
  wake();
}

void layer_feed::add(std::size_t index, const node::layer_source& layer) {
  if (closed_) return;
  lines_.push_back(node::layer_line(index, layer) + "\n");
  wake();
}

void layer_feed::end(std::size_t layers, std::optional<std::size_t> workspace) {
  if (closed_) return;
  lines_.push_back(node::end_line({layers, workspace}) + "\n");
  layers_ = layers;
  ended_ = true;
  closed_ = true;
  wake();
}

void layer_feed::abandon() {
  if (closed_) return;
  closed_ = true;
  wake();
}

std::unique_ptr<net::input_source> layer_feed::reader(std::string header, std::string node, bool lazy) {
  return std::make_unique<feed_reader>(*this, std::move(header), std::move(node), lazy);
}

const layer_feed::node_state& layer_feed::state_of(const std::string& node) const {
  static const node_state none;  // a node the feed was told nothing of
  const auto it = nodes_.find(node);
  return it == nodes_.end() ? none : it->second;
}

void layer_feed::fan_out(const std::string& node, std::string source, bool held) {
  auto& state = nodes_[node];
  if (state.source == source && state.held == held) return;
  state.source = std::move(source);
  state.held = held;
  wake();
}

void layer_feed::release(const std::string& node) {
  const auto it = nodes_.find(node);
  if (it == nodes_.end() || !it->second.held) return;
  it->second.held = false;
  wake();
}

bool layer_feed::held(const std::string& node) const { return state_of(node).held; }

void layer_feed::work_done(const std::string& node) {
  auto& state = nodes_[node];
  if (state.work_done) return;
  state.work_done = true;
  wake();
}

}  // namespace ferry::agent
