#include "tracing/action_interval.hpp"

#include <algorithm>
#include <limits>

namespace ferry::tracing {
namespace {

void widen(interval& span, double t) {
  span.begin = std::min(span.begin, t);
  span.end = std::max(span.end, t);
}

void extend(const tree_node& n, interval& span) {
  for (const auto* m : {n.start, n.end, n.message})
    if (m) widen(span, m->timestamp);
  for (const auto& [_, child] : n.children) extend(*child, span);
}

}  // namespace

interval extent(const tree_node& n) {
  interval span{std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  extend(n, span);
  if (span.begin > span.end) return {};
  return span;
}

namespace {

interval clipped(double begin, double end, const interval& parent) {
  interval out{std::clamp(begin, parent.begin, parent.end), std::clamp(end, parent.begin, parent.end)};
  out.end = std::max(out.end, out.begin);
  return out;
}

}  // namespace

interval action_interval(const tree_node& n, const interval& parent) {
  const double begin = n.start ? n.start->timestamp : extent(n).begin;
  return clipped(begin, n.end ? n.end->timestamp : parent.end, parent);
}

interval known_interval(const tree_node& n, const interval& parent) {
  if (n.start && n.end) return clipped(n.start->timestamp, n.end->timestamp, parent);
  const auto seen = extent(n);
  return clipped(n.start ? n.start->timestamp : seen.begin, n.end ? n.end->timestamp : seen.end, parent);
}

}  // namespace ferry::tracing
