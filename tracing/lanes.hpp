#pragma once
// Lanes for drawing actions as bars: an action goes on the first lane whose open actions all contain it,
// so the bars on one lane nest properly and concurrent siblings get lanes of their own instead of
// overlapping. Place actions in order of start, outer first (the longer one when two start together).
#include <cstddef>
#include <vector>

namespace ferry::tracing {

struct lane_place {
  std::size_t lane = 0;   // from 0
  std::size_t depth = 0;  // how many open actions on that lane contain this one
};

class lanes {
 public:
  lane_place place(double begin, double end);
  std::size_t count() const { return stacks_.size(); }

 private:
  std::vector<std::vector<double>> stacks_;  // end times of the open actions on each lane
};

}  // namespace ferry::tracing
