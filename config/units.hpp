#pragma once
// Durations ("250ms", "10s", "5m", "4h", or a number of seconds) and byte sizes ("8MiB", "1.5GB", or a
// number of bytes) as people write them in a config file or environment variable.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::config {

using duration = std::chrono::milliseconds;

// A byte count; its own type so that the schema can tell sizes from plain integers.
struct byte_size {
  std::uint64_t bytes = 0;
  friend bool operator==(const byte_size&, const byte_size&) = default;
};

// The largest values ferry takes: beyond them a setting is a mistake (inf, 1e300), and the arithmetic on
// it would overflow. 100 years; 1 EiB.
inline constexpr duration max_duration{3'153'600'000'000};
inline constexpr byte_size max_byte_size{1ULL << 60};

// nullopt for text that is not such a value, and for one over the maximum.
std::optional<duration> parse_duration(std::string_view text);
std::optional<byte_size> parse_byte_size(std::string_view text);
// A number of seconds (a TOML number): nullopt when negative, not finite or over max_duration.
std::optional<duration> duration_of_seconds(double seconds);

// A setting's text as error messages quote it: whole when short, else its start and its length.
std::string quoted_value(std::string_view text);

std::string format_duration(duration d);
std::string format_byte_size(byte_size s);

}  // namespace ferry::config
