#include "config/spelling.hpp"

#include <algorithm>
#include <vector>

namespace ferry::config {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::size_t> closest_words(std::string_view word, std::span<const std::string_view> candidates) {
  std::vector<std::size_t> best;
  std::size_t best_distance = 3;  // more edits than this is a different word, not a typo
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const auto candidate = candidates[i];
    // The lengths alone bound the distance from below: a long word (a pasted value, 10 MB of it) costs
    // nothing, where the full comparison with every candidate would cost its length times theirs.
    const auto gap = word.size() > candidate.size() ? word.size() - candidate.size() : candidate.size() - word.size();
    if (gap > best_distance) continue;
    const auto d = edit_distance(word, candidate);
    if (d > best_distance) continue;
    if (d < best_distance) {
      best.clear();
      best_distance = d;
    }
    best.push_back(i);
  }
  return best;
}

std::string_view closest_word(std::string_view word, std::span<const std::string_view> candidates) {
  const auto best = closest_words(word, candidates);
  return best.empty() ? std::string_view() : candidates[best.front()];
}

}  // namespace ferry::config
