#include "agent/materialise_trace.hpp"

#include "agent/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sstream>

namespace ferry::agent {
namespace {

constexpr std::size_t max_stray = 4096;

std::string short_id(std::string_view id) { return std::string(id.substr(0, 12)); }

// The last few lines of a stream, joined, for an error message.
std::string last_lines(std::string_view text, std::size_t count = 3) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  auto start = text.size();
  for (std::size_t n = 0; n < count && start > 0; ++n) {
    const auto newline = text.rfind('\n', start - 1);
    start = newline == std::string_view::npos ? 0 : newline + 1;
    if (newline == std::string_view::npos) break;
  }
  std::string out(text.substr(start));
  for (auto& c : out) {
    if (c == '\n') c = ' ';
  }
  return out;
}

}  // namespace

error_code step_error(std::string_view step) {
  if (step == "download") return errc::download_failed;
  if (step == "verify") return errc::digest_mismatch;
  if (step == "unzip") return errc::unzip_failed;
  if (step == "lock") return errc::cache_lock_timeout;
  return errc::cache_failed;
}

materialise_trace::materialise_trace(tracing::action& act, const environment_plan& plan, std::string node)
    : act_(act), plan_(plan), node_(std::move(node)) {}

const layer_source* materialise_trace::layer_named(const std::string& id) const {
  for (const auto& l : plan_.layers) {
    if (l.id == id) return &l;
  }
  return nullptr;
}

materialise_trace::open_layer& materialise_trace::layer_action(const std::string& id) {
  auto it = layers_.find(id);
  if (it != layers_.end()) return it->second;
  const auto* layer = layer_named(id);
  const std::string name = layer ? layer->name : "?";
  const std::size_t shards = layer ? layer->shards.size() : 0;
  auto child = act_.child("ferry:materialise:layer", {{"layer", id}, {"name", name}, {"shards", shards}});
  return layers_.try_emplace(id, open_layer{std::move(child), {}}).first->second;
}

void materialise_trace::on(const progress_event& e) {
  using kind = progress_event::kind;
  switch (e.what) {
    case kind::cache:
      cache_dir_ = e.text;
      act_.log("ferry:materialise:cache", {{"cache_dir", e.text}});
      break;
    case kind::begin: begin(e); break;
    case kind::end: end(e); break;
    case kind::fail: fail(e); break;
    case kind::cached: {
      ++layers_cached_;
      layer_action(e.layer).act.succeed({{"cached", true}});
      layers_.erase(e.layer);
      break;
    }
    case kind::fetched:
      ++layers_fetched_;
      finish_layer(e.layer, e);
      break;
    case kind::evicted:
      ++layers_evicted_;
      act_.log("ferry:materialise:evicted", {{"layer", e.layer}, {"disk_bytes", e.disk_bytes}});
      break;
    case kind::missing: {
      std::istringstream words(e.text);
      for (std::string tool; words >> tool;) missing_.push_back(tool);
      break;
    }
    case kind::ready:
      ready_ = true;
      workdir_ = e.text;
      break;
    case kind::malformed:
      act_.log("ferry:materialise:malformed", {{"line", e.text}});
      [[fallthrough]];
    case kind::other:
      if (!e.text.empty() && stray_.size() < max_stray) stray_ += e.text + "\n";
      break;
  }
}

void materialise_trace::begin(const progress_event& e) {
  const auto type = "ferry:materialise:" + e.step;
  if (e.layer == "-") {
    cache_steps_.erase(e.step);
    cache_steps_.try_emplace(e.step, act_.child(type));
    return;
  }
  auto& layer = layer_action(e.layer);
  const auto key = std::make_pair(e.step, e.shard);
  layer.steps.erase(key);
  layer.steps.try_emplace(key, layer.act.child(type, {{"shard", e.shard}}));
}

void materialise_trace::end(const progress_event& e) {
  if (e.step == "download") bytes_fetched_ += e.bytes;
  if (e.layer == "-") {
    auto it = cache_steps_.find(e.step);
    if (it == cache_steps_.end()) return;
    it->second.succeed();
    cache_steps_.erase(it);
    return;
  }
  auto layer = layers_.find(e.layer);
  if (layer == layers_.end()) return;
  auto step = layer->second.steps.find({e.step, e.shard});
  if (step == layer->second.steps.end()) return;
  step->second.succeed({{"bytes", e.bytes}});
  layer->second.steps.erase(step);
}

void materialise_trace::fail(const progress_event& e) {
  if (!first_failure_) first_failure_ = e;
  const auto ec = step_error(e.step);
  if (e.layer == "-") {
    auto it = cache_steps_.find(e.step);
    if (it == cache_steps_.end()) {
      act_.log("ferry:materialise:failed", {{"step", e.step}, {"reason", e.text}});
      return;
    }
    it->second.fail(ec, e.text);
    cache_steps_.erase(it);
    return;
  }
  auto& layer = layer_action(e.layer);
  auto step = layer.steps.find({e.step, e.shard});
  if (step != layer.steps.end()) {
    step->second.fail(ec, e.text);
    layer.steps.erase(step);
  }
  for (auto& [key, open] : layer.steps) open.fail(ec, e.text);
  layer.steps.clear();
  layer.act.fail(ec, layer_text(e));
  layers_.erase(e.layer);
}

void materialise_trace::finish_layer(const std::string& id, const progress_event& e) {
  auto& layer = layer_action(id);
  layer.steps.clear();
  layer.act.succeed({{"cached", false}, {"bytes", e.bytes}, {"disk_bytes", e.disk_bytes}});
  layers_.erase(id);
}

void materialise_trace::abandon(const error_code& ec, const diagnostics& diag) {
  const auto reason = describe(ec, diag);
  for (auto& [id, layer] : layers_) {
    for (auto& [key, step] : layer.steps) step.fail(ec, reason);
    layer.steps.clear();
    layer.act.fail(ec, reason);
  }
  layers_.clear();
  for (auto& [name, step] : cache_steps_) step.fail(ec, reason);
  cache_steps_.clear();
}

std::string materialise_trace::layer_text(const progress_event& e) const {
  const auto* layer = layer_named(e.layer);
  const std::string name = layer ? layer->name : "?";
  std::string shard;
  if (layer && layer->shards.size() > 1) shard = fmt::format(", shard {} of {}", e.shard + 1, layer->shards.size());
  const auto what = fmt::format("layer {} ({}{})", name, short_id(e.layer), shard);
  if (e.step == "download") return fmt::format("node {}: downloading {} failed: {}", node_, what, e.text);
  if (e.step == "verify")
    return fmt::format("node {}: {} does not match its digest: {}; the object in storage is not the one planned",
                       node_, what, e.text);
  if (e.step == "unzip") return fmt::format("node {}: unzipping {} failed: {}", node_, what, e.text);
  return fmt::format("node {}: putting {} into the layer cache failed: {}", node_, what, e.text);
}

std::string materialise_trace::missing_text() const {
  std::vector<std::string> names;
  std::vector<std::string> packages;
  for (const auto& tool : missing_) {
    if (tool == "unzip") {
      names.push_back("unzip (or python3)");
      packages.push_back("unzip");
    } else if (tool == "sha256sum") {
      names.push_back("sha256sum (or python3)");
      packages.push_back("coreutils");
    } else {
      names.push_back(tool);
      packages.push_back(tool);
    }
  }
  std::string list = names.back();
  if (names.size() > 1) {
    names.pop_back();
    list = fmt::format("{} and {}", fmt::join(names, ", "), list);
  }
  return fmt::format("node {} lacks {}: install {} (e.g. apt-get install {})", node_, list,
                     packages.size() == 1 ? "it" : "them", fmt::join(packages, " "));
}

error_code materialise_trace::failure(const net::exit_info& exit, std::string_view node_stderr,
                                      diagnostics& diag) const {
  error_code ec;
  std::string text;
  if (!missing_.empty()) {
    ec = errc::node_lacks_tools;
    text = missing_text();
  } else if (first_failure_ && first_failure_->layer != "-") {
    ec = step_error(first_failure_->step);
    text = layer_text(*first_failure_);
  } else if (first_failure_ && first_failure_->step == "lock") {
    ec = errc::cache_lock_timeout;
    text = fmt::format("node {}: {} (agent.cache_lock_timeout)", node_, first_failure_->text);
  } else if (first_failure_) {
    ec = step_error(first_failure_->step);
    text = fmt::format("node {}: the layer cache failed: {}", node_, first_failure_->text);
  } else {
    ec = errc::materialise_failed;
    text = fmt::format("node {}: materialising layers ended with {} before they were ready", node_,
                       exit.success() ? "success" : exit.describe());
  }
  if (!stray_.empty()) text += fmt::format("; its output: {}", last_lines(stray_));
  if (!node_stderr.empty()) text += fmt::format("; its stderr: {}", last_lines(node_stderr));
  diag.set(std::move(text));
  return ec;
}

}  // namespace ferry::agent
