#include "tracing/percentiles.hpp"

#include <algorithm>

namespace ferry::tracing {

double nearest_rank(const std::vector<double>& sorted, unsigned p) {
  if (sorted.empty()) return 0;
  // ceil(p * n / 100) in integers, so that 90% of 10 is rank 9 and not 9.000000001.
  const std::size_t rank = (static_cast<std::size_t>(p) * sorted.size() + 99) / 100;
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

percentiles summarise(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  percentiles out;
  out.count = values.size();
  if (values.empty()) return out;
  out.p50 = nearest_rank(values, 50);
  out.p90 = nearest_rank(values, 90);
  out.p99 = nearest_rank(values, 99);
  out.max = values.back();
  return out;
}

}  // namespace ferry::tracing
