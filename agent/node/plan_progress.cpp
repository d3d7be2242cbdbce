#include "agent/node/plan_progress.hpp"

#include "agent/node/error.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>

namespace ferry::agent::node {
namespace {

// With a catalogue, the rank orders the queue; a preferred layer goes above every rank.
constexpr std::uint64_t ranked = std::uint64_t(1) << 62;
constexpr std::uint64_t preferred = std::uint64_t(1) << 63;

bool aborted(const error_code& ec) { return ec == boost::asio::error::operation_aborted; }

}  // namespace

result<plan_progress::taken> plan_progress::take(plan_line line, diagnostics& diag) {
  auto refuse = [&](std::string text) {
    diag.set(std::move(text));
    reading_failed(make_error_code(errc::bad_plan), diag);
    return result<taken>(boost::system::in_place_error, make_error_code(errc::bad_plan));
  };
  if (std::holds_alternative<plan_work_done>(line)) return taken::work_done;
  if (end_) return refuse("the plan goes on after its end line");
  if (auto* catalogue = std::get_if<plan_catalogue>(&line)) {
    if (catalogue_ || !layers_.empty()) return refuse("the plan's catalogue comes twice, or after a layer");
    catalogue_ = std::move(*catalogue);
    return taken::catalogue;
  }
  if (auto* site = std::get_if<plan_site>(&line)) {
    if (site_ || catalogue_ || !layers_.empty()) return refuse("the plan's site comes twice, or after a layer");
    site_ = std::move(*site);
    return taken::site;
  }
  if (std::holds_alternative<plan_header>(line)) return refuse("the plan holds a second header");
  if (auto* end = std::get_if<plan_end>(&line)) {
    // Every shard line comes before the end line: a shard still missing never will.
    for (const auto& l : layers_)
      for (std::size_t i = 0; i < l.shards.size(); ++i)
        if (!l.shards[i].stored())
          return refuse(fmt::format("the plan ended without shard {} of layer {}", i + 1, l.name));
    end_ = *end;
    return taken::ended;
  }
  if (auto* shard = std::get_if<plan_shard>(&line)) return take_shard(*shard, diag);
  auto& placed = std::get<placed_layer>(line);
  places_[placed.index] = placed.layer.id;
  if (!seen_.insert(placed.layer.id).second) {
    // The same layer at another place: its line may know shards stored since the first one came.
    auto* known = find(placed.layer.id);
    bool more = false;
    for (std::size_t i = 0; known && i < known->shards.size() && i < placed.layer.shards.size(); ++i) {
      auto& have = known->shards[i];
      const auto& got = placed.layer.shards[i];
      if (have.stored() || !got.stored() || have.id != got.id) continue;
      have.url = got.url;
      have.sha256 = got.sha256;
      have.bytes = got.bytes;
      more = true;
    }
    return more ? taken::shard : taken::repeated;
  }
  layers_.push_back(std::move(placed.layer));
  std::uint64_t priority = content_bytes(layers_.back());
  if (catalogue_) {
    const auto& entries = catalogue_->layers;
    const auto rank = placed.index < entries.size() ? entries[placed.index].rank : entries.size();
    priority = ranked - std::min<std::uint64_t>(rank, ranked - 1);
  }
  if (auto asked = preferred_order_.find(layers_.back().id); asked != preferred_order_.end())
    priority = preferred - 1 - asked->second;
  waiting_.emplace(priority, layers_.size() - 1);
  return taken::queued;
}

layer_source* plan_progress::find(const std::string& id) {
  for (auto& l : layers_)
    if (l.id == id) return &l;
  return nullptr;
}

result<plan_progress::taken> plan_progress::take_shard(const plan_shard& line, diagnostics& diag) {
  auto refuse = [&](std::string text) {
    diag.set(std::move(text));
    reading_failed(make_error_code(errc::bad_plan), diag);
    return result<taken>(boost::system::in_place_error, make_error_code(errc::bad_plan));
  };
  auto* layer = find(line.layer);
  if (!layer) return refuse(fmt::format("the plan's shard line for layer {} comes before the layer's line", line.layer));
  if (line.index >= layer->shards.size())
    return refuse(fmt::format("the plan's shard line names shard {} of layer {}, which has {}", line.index + 1,
                              layer->name, layer->shards.size()));
  auto& shard = layer->shards[line.index];
  if (shard.stored()) return taken::repeated;  // the layer is at two places in the plan, each said it
  shard.url = line.url;
  shard.sha256 = line.sha256;
  shard.bytes = line.bytes;
  return taken::shard;
}

void plan_progress::reading_failed(error_code ec, const diagnostics& diag) {
  if (!reading_error_) {
    reading_error_ = ec;
    reading_diag_ = diag;
  }
  stopping_ = true;  // what is in progress stops too: the plan is not whole
}

const layer_source* plan_progress::next() {
  if (stopping_ || waiting_.empty() || held()) return nullptr;
  const auto i = waiting_.begin()->second;
  waiting_.erase(waiting_.begin());
  return &layers_[i];
}

bool plan_progress::held() const {
  if (stopping_ || waiting_.empty() || waiting_.begin()->first >= preferred - preferred_) return false;
  // The next layer is one nobody asked for: it waits while a layer an import waits for is still to come
  // (its line not here yet: the pack hurries it) or on its way here, which then has the bandwidth to itself.
  for (const auto& [id, when] : preferred_order_) {
    if (!finished_.contains(id)) return true;
  }
  return false;
}

bool plan_progress::prefer(const std::string& id) {
  if (preferred_order_.contains(id)) return true;  // asked for already: it keeps its place
  if (!seen_.contains(id)) {
    preferred_order_[id] = preferred_++;  // not here yet: it goes first when its line comes
    return true;
  }
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (layers_[it->second].id != id) continue;
    const auto i = it->second;
    waiting_.erase(it);
    preferred_order_[id] = preferred_;
    waiting_.emplace(preferred - 1 - preferred_++, i);
    return true;
  }
  return false;  // handed out already
}

void plan_progress::finished(const layer_source& layer, result<layer_result> got, const diagnostics& diag) {
  if (!got && !keep_going_) stopping_ = true;
  finished_.insert(layer.id);
  outcomes_.push_back({layer.id, std::move(got), diag});
}

std::optional<error_code> plan_progress::failure(diagnostics& diag) const {
  const outcome* failed = nullptr;
  for (const auto& o : outcomes_) {
    if (o.got) continue;
    if (!failed || (aborted(failed->got.error()) && !aborted(o.got.error()))) failed = &o;
  }
  if (reading_error_ && (!failed || aborted(failed->got.error()))) {
    diag = reading_diag_;
    return reading_error_;
  }
  if (failed) {
    diag = failed->diag;
    return failed->got.error();
  }
  return std::nullopt;
}

materialised plan_progress::counts() const {
  materialised m;
  for (const auto& o : outcomes_) {
    if (!o.got) continue;
    if (o.got->cached) {
      ++m.layers_cached;
    } else {
      ++m.layers_fetched;
      m.bytes_fetched += o.got->downloaded;
    }
  }
  return m;
}

result<materialised> plan_progress::environment(const std::function<std::string(const std::string&)>& layer_dir,
                                                diagnostics& diag) const {
  // A plan that never ended, or a layer it named that was never made, is work cut short.
  if (!end_ || outcomes_.size() < layers_.size()) return error_code(boost::asio::error::operation_aborted);
  materialised m = counts();
  for (std::size_t i = 0; i < end_->layers; ++i) {
    const auto it = places_.find(i);
    if (it == places_.end()) {
      diag.set(fmt::format("the plan ended without layer {} of its {}", i + 1, end_->layers));
      return make_error_code(errc::bad_plan);
    }
    m.python_path.push_back(layer_dir(it->second));
  }
  if (places_.size() > end_->layers) {
    diag.set(fmt::format("the plan placed {} layers, its end line counts {}", places_.size(), end_->layers));
    return make_error_code(errc::bad_plan);
  }
  if (end_->workspace) m.workdir = m.python_path[*end_->workspace];
  return m;
}

}  // namespace ferry::agent::node
