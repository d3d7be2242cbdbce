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

std::optional<duration> parse_duration(std::string_view text);
std::optional<byte_size> parse_byte_size(std::string_view text);

std::string format_duration(duration d);
std::string format_byte_size(byte_size s);

}  // namespace ferry::config
