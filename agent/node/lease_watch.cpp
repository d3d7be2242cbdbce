#include "agent/node/lease_watch.hpp"

#include <algorithm>

namespace ferry::agent::node {

bool lease_id_valid(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::optional<std::int64_t> parse_expiry(std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (text.empty() || text.size() > 18) return std::nullopt;  // 18 digits always fit in int64
  std::int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

void lease_watch::read(std::int64_t expires_at) {
  if (!expired_) expires_at_ = expires_at;
}

void lease_watch::start_grace(steady_time now) {
  if (!kill_at_) kill_at_ = now + grace_;
}

void lease_watch::signalled(steady_time now) { start_grace(now); }

void lease_watch::expire(steady_time now) {
  expired_ = true;
  start_grace(now);
}

lease_step lease_watch::next(wall_time wall, steady_time now) const {
  using std::chrono::milliseconds;
  if (killed_) return {lease_action::wait, read_interval};
  if (kill_at_ && now >= *kill_at_) return {lease_action::kill};
  milliseconds wait = read_interval;
  if (!expired_ && expires_at_) {
    const wall_time expiry{std::chrono::seconds(*expires_at_)};
    if (wall >= expiry) return {lease_action::term};
    wait = std::min(wait, std::chrono::ceil<milliseconds>(expiry - wall));
  }
  if (kill_at_) wait = std::min(wait, std::chrono::ceil<milliseconds>(*kill_at_ - now));
  return {lease_action::wait, std::max(wait, milliseconds(1))};
}

}  // namespace ferry::agent::node
