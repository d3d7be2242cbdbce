#include "agent/materialise/fanout_plan.hpp"

#include <algorithm>

namespace ferry::agent {

fanout_plan::fanout_plan(std::size_t seeds, std::size_t degree, std::size_t expected)
    : seeds_(std::max<std::size_t>(1, seeds)), degree_(std::max<std::size_t>(1, degree)), expected_(expected) {}

fanout_plan::place fanout_plan::arrive(const std::string& node) {
  auto [it, fresh] = nodes_.try_emplace(node);
  if (fresh) {
    it->second.index = order_.size();
    order_.push_back(node);
  }
  place p;
  p.index = it->second.index;
  if (p.index >= seeds_) p.parent = order_[(p.index - seeds_) / degree_];
  p.serves = first_child(p.index) < expected_;
  return p;
}

void fanout_plan::serving(const std::string& node, std::string url) {
  if (auto it = nodes_.find(node); it != nodes_.end()) it->second.url = std::move(url);
}

std::string fanout_plan::source_of(const std::string& node) const {
  const auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.index < seeds_) return {};
  return nodes_.at(order_[(it->second.index - seeds_) / degree_]).url;
}

std::optional<std::string> fanout_plan::parent_of(const std::string& node) const {
  const auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.index < seeds_) return std::nullopt;
  return order_[(it->second.index - seeds_) / degree_];
}

std::vector<std::string> fanout_plan::children_of(const std::string& node) const {
  std::vector<std::string> out;
  const auto it = nodes_.find(node);
  if (it == nodes_.end()) return out;
  const auto first = first_child(it->second.index);
  for (auto c = first; c < first + degree_ && c < order_.size(); ++c) out.push_back(order_[c]);
  return out;
}

void fanout_plan::landed(const std::string& node) {
  if (auto it = nodes_.find(node); it != nodes_.end()) it->second.landed = true;
}

bool fanout_plan::children_settled(const std::string& node) const {
  const auto it = nodes_.find(node);
  if (it == nodes_.end()) return true;
  const auto first = first_child(it->second.index);
  const auto last = std::min(first + degree_, expected_);
  for (auto c = first; c < last; ++c) {
    if (c >= order_.size() || !nodes_.at(order_[c]).landed) return false;
  }
  return true;
}

}  // namespace ferry::agent
