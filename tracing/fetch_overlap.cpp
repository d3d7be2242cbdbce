#include "tracing/fetch_overlap.hpp"

#include "tracing/action_types.hpp"
#include "tracing/utilisation.hpp"

#include <algorithm>
#include <tuple>

namespace ferry::tracing {
namespace {

std::string text_field(const tree_node& n, std::string_view key) {
  const auto* v = n.field(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::uint64_t count_field(const tree_node& n, std::string_view key) {
  const auto* v = n.field(key);
  if (!v) return 0;
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
  return 0;
}

// The seconds that a set of intervals covers, and of them those before `until`.
std::pair<double, double> covered(std::vector<interval> spans, double until) {
  double total = 0, before = 0;
  for (const auto& run : merge_intervals(std::move(spans))) {
    total += run.length();
    before += std::max(0.0, std::min(run.end, until) - run.begin);
  }
  return {total, before};
}

}  // namespace

void fetch_overlap_scanner::action(const tree_node& n, const interval& time) {
  const auto type = n.type();
  if (type == action_types::packaging::pack) {
    // A job packs once; a second one (none today) would be a later one: the first is the cold start's.
    if (!packed_) pack_ = time;
    packed_ = true;
  } else if (type == action_types::packaging::upload && n.end && n.status() == "succeeded") {
    const auto layer = text_field(n, "layer_id");
    if (!layer.empty()) uploaded_[{layer, count_field(n, "shard")}] = time.end;
  } else if (type == action_types::node::shard) {
    fetches_.push_back(time);
    const std::pair<std::string, std::uint64_t> key{text_field(n, "layer"), count_field(n, "shard")};
    auto [it, inserted] = first_fetched_.try_emplace(key, time.begin);
    if (!inserted) it->second = std::min(it->second, time.begin);
  }
}

fetch_overlap fetch_overlap_scanner::finish() const {
  fetch_overlap out;
  out.packed = packed_;
  out.pack = pack_;
  out.fetches = fetches_.size();
  if (!packed_) return out;
  for (const auto& f : fetches_)
    if (f.begin < pack_.end) ++out.fetches_early;
  std::tie(out.fetching, out.fetching_in_pack) = covered(fetches_, pack_.end);
  std::vector<double> waits;
  for (const auto& [key, fetched] : first_fetched_) {
    const auto up = uploaded_.find(key);
    if (up != uploaded_.end()) waits.push_back(std::max(0.0, fetched - up->second));
  }
  out.upload_to_fetch = summarise(std::move(waits));
  return out;
}

}  // namespace ferry::tracing
