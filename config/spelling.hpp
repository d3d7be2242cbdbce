#pragma once
// "Did you mean": the known word closest to a misspelt one, for configuration keys and command names alike.
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace ferry::config {

// The candidate within three edits (insertions, deletions, substitutions) of `word` with the fewest, the
// first of equals; "" when none is that close.
std::string_view closest_word(std::string_view word, std::span<const std::string_view> candidates);

// The positions in `candidates` of every candidate tied for closest to `word`, within the same three edits;
// empty when none is that close. For a word that has several right spellings (a key name in two sections).
std::vector<std::size_t> closest_words(std::string_view word, std::span<const std::string_view> candidates);

}  // namespace ferry::config
