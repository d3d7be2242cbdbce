#pragma once
// A name as a trace's JSON text holds it, quotes included: a search for an action type then finds that
// type, not a longer one that begins with it.
#include <fmt/format.h>

#include <string>
#include <string_view>

namespace ferry::test {

inline std::string quoted(std::string_view name) { return fmt::format("\"{}\"", name); }

}  // namespace ferry::test
