#include "net/exec_group_line.hpp"

#include <algorithm>
#include <charconv>

namespace ferry::net {

std::span<const char> exec_group_line::take(std::span<const char> bytes) {
  if (settled_) return bytes;
  const std::size_t scanned = held_.size();
  held_.append(bytes.data(), bytes.size());
  // Each line is looked at once, when its newline comes; lines ending past max_preamble are not.
  const std::size_t limit = std::min(held_.size(), max_preamble + 1);
  for (std::size_t at = held_.find('\n', scanned); at != std::string::npos && at < limit;
       at = held_.find('\n', at + 1)) {
    const std::size_t begin = line_start_;
    line_start_ = at + 1;
    if (line_is_group(begin, at)) return settle(at + 1);
  }
  if (held_.size() > max_preamble) return settle(0);
  return {};
}

std::span<const char> exec_group_line::end() {
  if (settled_) return {};
  return settle(0);
}

bool exec_group_line::line_is_group(std::size_t begin, std::size_t end) {
  const std::string_view line(held_.data() + begin, end - begin);
  if (!line.starts_with(marker)) return false;
  long id = 0;
  const char* first = line.data() + marker.size();
  const char* last = line.data() + line.size();
  const auto [ptr, ec] = std::from_chars(first, last, id);
  // 0 and 1 are no process group a command could lead, and kill -- -1 would reach every process.
  if (ec != std::errc{} || ptr != last || id <= 1) return false;
  group_ = id;
  return true;
}

std::span<const char> exec_group_line::settle(std::size_t from) {
  settled_ = true;
  held_.erase(0, from);
  return held_;
}

}  // namespace ferry::net
