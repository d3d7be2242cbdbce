#include "agent/node/import_gate.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>

namespace ferry::agent::node {
namespace json = boost::json;

namespace {

std::string_view state_name(import_gate::state s) {
  switch (s) {
    case import_gate::state::ready: return "ready";
    case import_gate::state::failed: return "failed";
    default: return "pending";
  }
}

}  // namespace

void import_gate::open(const plan_catalogue& catalogue, const std::function<std::string(const std::string&)>& dir_of) {
  layers_.clear();
  modules_.clear();
  dists_.clear();
  for (const auto& e : catalogue.layers) {
    for (const auto& m : e.modules) modules_[m].push_back(layers_.size());
    for (const auto& d : e.dists) dists_[d].push_back(layers_.size());
    layers_.push_back({e, dir_of(e.id), state::pending, {}});
  }
  workspace_ = catalogue.workspace;
  opened_ = true;
  ++generation_;
}

void import_gate::landed(const std::string& id) {
  for (auto& l : layers_) {
    if (l.entry.id == id && l.st == state::pending) l.st = state::ready;
  }
  ++generation_;
}

void import_gate::failed(const std::string& id, const std::string& reason) {
  for (auto& l : layers_) {
    if (l.entry.id != id || l.st != state::pending) continue;
    l.st = state::failed;
    l.reason = reason;
  }
  ++generation_;
}

void import_gate::stop(const std::string& reason) {
  for (auto& l : layers_) {
    if (l.st != state::pending) continue;
    l.st = state::failed;
    l.reason = reason;
  }
  ++generation_;
}

bool import_gate::all_landed() const {
  return opened_ && std::all_of(layers_.begin(), layers_.end(), [](const layer& l) { return l.st == state::ready; });
}

std::size_t import_gate::pending() const {
  return static_cast<std::size_t>(
      std::count_if(layers_.begin(), layers_.end(), [](const layer& l) { return l.st == state::pending; }));
}

std::vector<std::size_t> import_gate::holders(std::string_view kind, std::string_view name) const {
  if (kind == "dist" && name == "*") {
    std::vector<std::size_t> all(layers_.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }
  if (kind == "layer") {  // by its index: an editable install's target, which no import name reaches
    std::size_t index = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
    if (ec != std::errc() || end != name.data() + name.size() || index >= layers_.size()) return {};
    return {index};
  }
  const auto& map = kind == "dist" ? dists_ : modules_;
  const auto it = map.find(name);
  return it == map.end() ? std::vector<std::size_t>{} : it->second;
}

bool import_gate::settled(const std::vector<std::size_t>& indexes) const {
  return std::all_of(indexes.begin(), indexes.end(),
                     [&](std::size_t i) { return i >= layers_.size() || layers_[i].st != state::pending; });
}

std::vector<std::string> import_gate::ids(const std::vector<std::size_t>& indexes) const {
  std::vector<std::string> out;
  for (auto i : indexes)
    if (i < layers_.size()) out.push_back(layers_[i].entry.id);
  return out;
}

std::string import_gate::names(const std::vector<std::size_t>& indexes) const {
  std::string out;
  for (auto i : indexes) {
    if (i >= layers_.size()) continue;
    if (!out.empty()) out += ", ";
    out += layers_[i].entry.name;
  }
  return out;
}

std::string import_gate::hello_reply() const {
  json::array layers;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const auto& l = layers_[i];
    json::array modules(l.entry.modules.begin(), l.entry.modules.end());
    json::array dists(l.entry.dists.begin(), l.entry.dists.end());
    layers.push_back(json::object{{"index", i}, {"id", l.entry.id}, {"name", l.entry.name}, {"dir", l.dir},
                                  {"modules", std::move(modules)}, {"dists", std::move(dists)},
                                  {"state", state_name(l.st)}, {"reason", l.reason}});
  }
  return json::serialize(json::object{{"layers", std::move(layers)}}) + "\n";
}

std::string import_gate::states_reply() const {
  json::array layers;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const auto& l = layers_[i];
    json::object o{{"index", i}, {"state", state_name(l.st)}};
    if (l.st == state::failed) o["reason"] = l.reason;
    layers.push_back(std::move(o));
  }
  return json::serialize(json::object{{"layers", std::move(layers)}}) + "\n";
}

void import_gate::imported(const std::vector<std::string>& modules) {
  // Each process's order merges in: a layer keeps the place it first got.
  for (const auto& m : modules) {
    const auto it = modules_.find(m);
    if (it == modules_.end()) continue;
    for (auto i : it->second) {
      const auto& name = layers_[i].entry.name;
      if (std::find(imported_.begin(), imported_.end(), name) == imported_.end()) imported_.push_back(name);
    }
  }
}

}  // namespace ferry::agent::node
