#include "tracing/lanes.hpp"

namespace ferry::tracing {
namespace {

bool fits(std::vector<double>& stack, double begin, double end) {
  while (!stack.empty() && stack.back() <= begin) stack.pop_back();
  return stack.empty() || end <= stack.back();
}

}  // namespace

lane_place lanes::place(double begin, double end) {
  std::size_t i = 0;
  while (i < stacks_.size() && !fits(stacks_[i], begin, end)) ++i;
  if (i == stacks_.size()) stacks_.emplace_back();
  stacks_[i].push_back(end);
  return {i, stacks_[i].size() - 1};
}

}  // namespace ferry::tracing
