#include "agent/cluster/dask_log.hpp"

#include <algorithm>
#include <charconv>

namespace ferry::agent {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The text after `marker` in `line`, trimmed; none when the marker is not there.
std::optional<std::string_view> after(std::string_view line, std::string_view marker) {
  const auto at = line.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  return trim(line.substr(at + marker.size()));
}

}  // namespace

std::optional<dask_address> parse_dask_address(std::string_view text) {
  text = trim(text);
  if (text.starts_with("tcp://")) text.remove_prefix(6);
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto host = text.substr(0, colon);
  const auto port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 || port > 65535)
    return std::nullopt;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.find_first_of(" /") != std::string_view::npos) return std::nullopt;
  return dask_address{std::string(host), static_cast<std::uint16_t>(port)};
}

void dask_log::feed(std::string_view bytes) {
  for (;;) {
    const auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) break;
    if (partial_.empty()) {
      line(bytes.substr(0, nl));
    } else {
      partial_.append(bytes.substr(0, nl));
      line(partial_);
      partial_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
  // A line longer than any log line is no line of ours: only its start is kept.
  constexpr std::size_t longest = 16 << 10;
  partial_.append(bytes.substr(0, longest > partial_.size() ? longest - partial_.size() : 0));
}

void dask_log::line(std::string_view text) {
  tail_[lines_++ % std::size(tail_)] = std::string(text.substr(0, 1000));
  // Only distributed's own log lines, not what a user's code printed.
  if (text.find("distributed.") == std::string_view::npos) return;
  if (auto a = after(text, "Scheduler at:")) {
    if (auto addr = parse_dask_address(*a)) scheduler_ = addr, ++changes_;
  } else if (auto d = after(text, "dashboard at:")) {
    if (auto addr = parse_dask_address(*d)) dashboard_ = addr, ++changes_;
  } else if (after(text, "Registered to:")) {
    registered_ = true;
    ++changes_;
  } else if (auto c = after(text, "Receive client connection:")) {
    if (clients_.emplace(*c).second) ++changes_;
  } else if (auto r = after(text, "Remove client ")) {
    if (auto it = clients_.find(*r); it != clients_.end()) {
      clients_.erase(it);
      ++changes_;
    }
  }
}

std::string dask_log::tail() const {
  std::string out;
  const auto n = std::min(lines_, std::size(tail_));
  for (std::size_t i = lines_ - n; i < lines_; ++i) out += tail_[i % std::size(tail_)] + "\n";
  return out;
}

}  // namespace ferry::agent
