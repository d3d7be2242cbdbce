#include "agent/materialise/layer_feed.hpp"

#include "net/cancellation.hpp"

#include <algorithm>
#include <cstring>

namespace ferry::agent {

namespace asio = boost::asio;

class layer_feed::feed_reader final : public net::input_source {
 public:
  feed_reader(layer_feed& feed, std::string header, std::string node, bool lazy)
      : feed_(feed), current_(std::move(header) + "\n"), node_(std::move(node)), lazy_(lazy) {
    feed_.readers_.push_back(this);
  }
  ~feed_reader() override { std::erase(feed_.readers_, this); }

  asio::awaitable<result<std::size_t>> read(std::span<char> into) override {
    for (;;) {
      if (offset_ < current_.size()) {
        const auto n = std::min(into.size(), current_.size() - offset_);
        std::memcpy(into.data(), current_.data() + offset_, n);
        offset_ += n;
        co_return n;
      }
      const auto step = next_step();
      if (step == next::end) {
        told_end_ = true;
        co_return std::size_t{0};
      }
      if (step != next::wait) {
        take(step);
        continue;
      }
      // Wait for the next line: a channel that asks ready() first never gets here while there is none. A
      // wake is told from a cancellation by the notifications it moved on.
      const auto seen = feed_.changed_.notifications();
      error_code ec;
      co_await feed_.changed_.wait(ec);
      // A cancellation may come with a wake in the same turn, so it is asked for too.
      // (Not `a || co_await b`: GCC 12 miscompiles co_await in a short-circuit operand.)
      const bool stopped = co_await net::cancelled();
      if (feed_.changed_.notifications() == seen || stopped) co_return error_code(asio::error::operation_aborted);
    }
  }

  // While nothing is there for the node, the channel goes on reading the node program's messages (a lazy
  // start's "the command may start" must not wait for the next layer) and the feed wakes it.
  bool ready() const override { return offset_ < current_.size() || next_step() != next::wait; }
  void on_ready(std::function<void()> wake) override { wake_ = std::move(wake); }
  void changed() const {
    if (wake_) wake_();
  }

 private:
  enum class next { wait, source, work_done, line, end };

  // What the node gets next, looked up again on every turn: the feed changes it, and wakes this reader.
  next next_step() const {
    if (told_done_ || told_end_) return next::end;
    const auto& state = feed_.state_of(node_);
    if (!state.source.empty() && !told_source_) return next::source;
    if (lazy_ && state.work_done) return next::work_done;
    // A fan-out child whose parent's server is on its way holds its layers back until it is there.
    if (state.held) return next::wait;
    if (next_ < feed_.lines_.size()) return next::line;
    // A lazy start's input stays open after the plan's end, until the work is done.
    if (feed_.closed_ && !(lazy_ && feed_.ended_)) return next::end;
    return next::wait;
  }

  void take(next step) {
    offset_ = 0;
    if (step == next::source) {
      current_ = node::peer_line({feed_.state_of(node_).source}) + "\n";
      told_source_ = true;
    } else if (step == next::work_done) {
      current_ = node::work_done_line() + "\n";
      told_done_ = true;
    } else {
      current_ = feed_.lines_[next_++];
    }
  }

  layer_feed& feed_;
  std::string current_;
  std::size_t offset_ = 0;
  std::size_t next_ = 0;
  std::string node_;
  bool lazy_;
  bool told_done_ = false;
  bool told_source_ = false;
  bool told_end_ = false;
  std::function<void()> wake_;
};

layer_feed::layer_feed(asio::any_io_executor io) : changed_(std::move(io)) {}

std::unique_ptr<layer_feed> layer_feed::of(asio::any_io_executor io, const node::environment_plan& plan) {
  auto feed = std::make_unique<layer_feed>(std::move(io));
  for (std::size_t i = 0; i < plan.layers.size(); ++i) feed->add(i, plan.layers[i]);
  feed->end(plan.layers.size(), plan.workspace);
  return feed;
}

void layer_feed::wake() {
  changed_.notify();
  for (const auto* r : readers_) r->changed();
}

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

void layer_feed::add_shard(const node::plan_shard& shard) {
  if (closed_) return;
  lines_.push_back(node::shard_line(shard) + "\n");
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
