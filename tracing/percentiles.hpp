#pragma once
// Percentiles by the nearest-rank method: the p-th percentile of n sorted values is the value at 1-based
// rank ceil(p/100 * n). Every answer is one of the values (no interpolation), so a test knows it exactly:
// of 1..10, p50 = 5, p90 = 9, p99 = 10.
#include <cstddef>
#include <vector>

namespace ferry::tracing {

struct percentiles {
  std::size_t count = 0;  // values summarised; the rest are 0 when there were none
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

// The p-th percentile (1..100) of values sorted ascending; 0 when there are none.
double nearest_rank(const std::vector<double>& sorted, unsigned p);

// Sorts `values` and summarises them.
percentiles summarise(std::vector<double> values);

}  // namespace ferry::tracing
