#pragma once
// "Did you mean": the known word closest to a misspelt one, for configuration keys and command names alike.
#include <span>
#include <string_view>

namespace ferry::config {

// The candidate within three edits (insertions, deletions, substitutions) of `word` with the fewest, the
// first of equals; "" when none is that close.
std::string_view closest_word(std::string_view word, std::span<const std::string_view> candidates);

}  // namespace ferry::config
