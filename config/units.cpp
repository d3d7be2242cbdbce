#include "config/units.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

namespace ferry::config {
namespace {

// A non-negative decimal number followed by a unit, with optional space between.
std::optional<std::pair<double, std::string_view>> split_number(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || !std::isfinite(value) || value < 0) return std::nullopt;
  std::string_view unit(ptr, static_cast<std::size_t>(text.data() + text.size() - ptr));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  return std::pair{value, unit};
}

template <std::size_t N>
std::optional<double> scale(std::string_view unit, const std::array<std::pair<std::string_view, double>, N>& units) {
  for (const auto& [name, factor] : units)
    if (unit == name) return factor;
  return std::nullopt;
}

}  // namespace

std::optional<duration> parse_duration(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, double>, 6> units = {
      {{"", 1000.0}, {"ms", 1.0}, {"s", 1000.0}, {"m", 60'000.0}, {"h", 3'600'000.0}, {"d", 86'400'000.0}}};
  const auto parts = split_number(text);
  if (!parts) return std::nullopt;
  const auto factor = scale(parts->second, units);
  if (!factor) return std::nullopt;
  const double ms = parts->first * *factor;
  // Compared as doubles, before any conversion: a cast of an out-of-range double is undefined.
  if (!(ms <= static_cast<double>(max_duration.count()))) return std::nullopt;
  return duration(static_cast<std::int64_t>(std::llround(ms)));
}

std::optional<duration> duration_of_seconds(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return std::nullopt;
  const double ms = seconds * 1000.0;
  if (!(ms <= static_cast<double>(max_duration.count()))) return std::nullopt;
  return duration(static_cast<std::int64_t>(std::llround(ms)));
}

std::string quoted_value(std::string_view text) {
  constexpr std::size_t shown = 60;
  if (text.size() <= shown) return fmt::format("'{}'", text);
  return fmt::format("'{}...' ({} bytes)", text.substr(0, shown), text.size());
}

std::optional<byte_size> parse_byte_size(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, double>, 10> units = {
      {{"", 1.0}, {"B", 1.0}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"KiB", 1024.0},
       {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}}};
  const auto parts = split_number(text);
  if (!parts) return std::nullopt;
  const auto factor = scale(parts->second, units);
  if (!factor) return std::nullopt;
  const double bytes = parts->first * *factor;
  if (!(bytes <= static_cast<double>(max_byte_size.bytes))) return std::nullopt;
  return byte_size{static_cast<std::uint64_t>(std::llround(bytes))};
}

std::string format_duration(duration d) {
  const auto ms = d.count();
  if (ms % 86'400'000 == 0 && ms != 0) return fmt::format("{}d", ms / 86'400'000);
  if (ms % 3'600'000 == 0 && ms != 0) return fmt::format("{}h", ms / 3'600'000);
  if (ms % 60'000 == 0 && ms != 0) return fmt::format("{}m", ms / 60'000);
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

std::string format_byte_size(byte_size s) {
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 4> units = {
      {{"TiB", 1ULL << 40}, {"GiB", 1ULL << 30}, {"MiB", 1ULL << 20}, {"KiB", 1ULL << 10}}};
  for (const auto& [name, factor] : units)
    if (s.bytes != 0 && s.bytes % factor == 0) return fmt::format("{}{}", s.bytes / factor, name);
  return fmt::format("{}", s.bytes);
}

}  // namespace ferry::config
