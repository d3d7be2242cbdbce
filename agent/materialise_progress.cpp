#include "agent/materialise_progress.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

namespace ferry::agent {
namespace {

constexpr std::string_view prefix = "@ferry ";

// Splits off the next field (up to a space); the rest stays in `line`.
std::string_view next_field(std::string_view& line) {
  const auto space = line.find(' ');
  const auto field = line.substr(0, space);
  line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  return field;
}

std::optional<std::uint64_t> number(std::string_view text) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

bool is_step(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
}

// Reads the fields a kind takes into `e`; false when the line does not fit.
bool read_fields(progress_event& e, std::string_view rest) {
  using kind = progress_event::kind;
  auto take_layer = [&] {
    e.layer = std::string(next_field(rest));
    return !e.layer.empty();
  };
  auto take_number = [&](auto& into) {
    auto n = number(next_field(rest));
    if (n) into = static_cast<std::remove_reference_t<decltype(into)>>(*n);
    return n.has_value();
  };
  switch (e.what) {
    case kind::cache:
    case kind::ready:
    case kind::missing:
      e.text = std::string(rest);
      return !e.text.empty();
    case kind::begin:
    case kind::end:
    case kind::fail: {
      if (!take_layer()) return false;
      e.step = std::string(next_field(rest));
      if (!is_step(e.step) || !take_number(e.shard)) return false;
      if (e.what == kind::fail) {
        e.text = std::string(rest);
        return true;
      }
      if (e.what == kind::end && !take_number(e.bytes)) return false;
      return rest.empty();
    }
    case kind::cached:
      return take_layer() && rest.empty();
    case kind::fetched:
      return take_layer() && take_number(e.bytes) && take_number(e.disk_bytes) && rest.empty();
    case kind::evicted:
      return take_layer() && take_number(e.disk_bytes) && rest.empty();
    case kind::malformed:
    case kind::other:
      break;
  }
  return false;
}

std::optional<progress_event::kind> kind_named(std::string_view name) {
  using kind = progress_event::kind;
  static constexpr std::pair<std::string_view, kind> kinds[] = {
      {"cache", kind::cache},     {"begin", kind::begin},     {"end", kind::end},
      {"fail", kind::fail},       {"cached", kind::cached},   {"fetched", kind::fetched},
      {"evicted", kind::evicted}, {"missing", kind::missing}, {"ready", kind::ready}};
  for (const auto& [n, k] : kinds) {
    if (n == name) return k;
  }
  return std::nullopt;
}

progress_event malformed(std::string_view line) {
  progress_event e;
  e.what = progress_event::kind::malformed;
  e.text = std::string(line);
  return e;
}

}  // namespace

progress_event parse_progress_line(std::string_view line) {
  if (line == prefix.substr(0, prefix.size() - 1)) return malformed(line);
  if (!line.starts_with(prefix)) {
    progress_event e;
    e.text = std::string(line);
    return e;
  }
  auto rest = line.substr(prefix.size());
  const auto what = kind_named(next_field(rest));
  if (!what) return malformed(line);
  progress_event e;
  e.what = *what;
  if (!read_fields(e, rest)) return malformed(line);
  return e;
}

std::vector<progress_event> progress_parser::feed(std::string_view bytes) {
  std::vector<progress_event> out;
  while (!bytes.empty()) {
    const auto newline = bytes.find('\n');
    const auto piece = bytes.substr(0, newline);
    // Past max_line the rest of the line is dropped; the line is reported (cut) when it ends.
    if (!overlong_) {
      const auto room = max_line - line_.size();
      line_.append(piece.substr(0, room));
      overlong_ = piece.size() > room;
    }
    if (newline == std::string_view::npos) break;
    complete_line(out);
    bytes.remove_prefix(newline + 1);
  }
  return out;
}

std::vector<progress_event> progress_parser::finish() {
  std::vector<progress_event> out;
  if (!line_.empty() || overlong_) out.push_back(malformed(line_));
  line_.clear();
  overlong_ = false;
  return out;
}

void progress_parser::complete_line(std::vector<progress_event>& out) {
  out.push_back(overlong_ ? malformed(line_) : parse_progress_line(line_));
  line_.clear();
  overlong_ = false;
}

}  // namespace ferry::agent
