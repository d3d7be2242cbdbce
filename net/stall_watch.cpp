#include "net/stall_watch.hpp"

#include "config/units.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

namespace ferry::net {

namespace asio = boost::asio;

namespace {

std::int64_t whole_seconds(stall_watch::clock::duration d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d).count();
}

std::string others(std::size_t calls) {
  if (calls <= 1) return "";
  return fmt::format(", and {} more request{}", calls - 1, calls == 2 ? "" : "s");
}

}  // namespace

stall_watch::stall_watch(stall_settings settings, notice on_warning)
    : settings_(settings), notice_(std::move(on_warning)), progress_(clock::now()), idle_since_(progress_) {}

void stall_watch::look_at_sockets() {
  bool moving = false;
  for (auto* e : exchanges_) moving = e->draining() || moving;  // each looks, to keep its count fresh
  if (moving && trust_sends_) progress();
}

stall_watch::call_ref stall_watch::enter(stall_subject what) {
  // The time no call ran is not quiet: the clock goes on from where the last call left it.
  if (calls_.empty()) progress_ += clock::now() - idle_since_;
  calls_.push_back(call{std::move(what)});
  return std::prev(calls_.end());
}

void stall_watch::leave(call_ref c) {
  calls_.erase(c);
  if (calls_.empty()) idle_since_ = clock::now();
}

asio::awaitable<void> stall_watch::watch(tracing::action& act, call_ref me) {
  co_await accept_cancellation();
  asio::steady_timer timer(co_await asio::this_coro::executor);
  me->timer = &timer;
  struct forget {
    call& c;
    ~forget() { c.timer = nullptr; }
  } forgetting{*me};
  const auto never = clock::duration::max();
  const clock::duration limit = settings_.limit.count() > 0 ? clock::duration(settings_.limit) : never;
  const clock::duration warning = settings_.warning.count() > 0 ? clock::duration(settings_.warning) : never;
  for (;;) {
    if (stalled_) co_return;
    look_at_sockets();
    const auto now = clock::now();
    if (progress_ > episode_ || next_warning_ == clock::duration::zero()) next_warning_ = warning;
    episode_ = progress_;
    const auto quiet = now - progress_;
    if (quiet >= limit) {
      trip(act, quiet);
      co_return;
    }
    if (quiet >= next_warning_) {
      warn(act, quiet);
      while (next_warning_ <= quiet && next_warning_ < never / 2) next_warning_ *= 2;
    }
    const auto next = std::min(next_warning_, limit);
    if (next == never) {
      timer.expires_at(clock::time_point::max());
    } else {
      timer.expires_at(progress_ + next);
    }
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    // Cancelled: the call ended, its caller stops, or another watcher tripped the watch (looked at above).
    if (ec && !stalled_) co_return;
  }
}

void stall_watch::warn(tracing::action& act, clock::duration quiet) {
  const auto& c = calls_.front().what;
  act.log(action_types::s3::stall_warning, {{"endpoint", c.endpoint}, {"operation", c.operation},
                                            {"object", c.object}, {"quiet_s", whole_seconds(quiet)},
                                            {"calls", calls_.size()}});
  if (!notice_) return;
  notice_(fmt::format("storage at {} has made no progress for {} s: {} {} is waiting{} (ferry gives up after {}, "
                      "net.stall_limit)",
                      c.endpoint, whole_seconds(quiet), c.operation, c.object, others(calls_.size()),
                      settings_.limit.count() > 0 ? config::format_duration(settings_.limit) : "never"));
}

void stall_watch::trip(tracing::action& act, clock::duration quiet) {
  const auto& c = calls_.front().what;
  stalled_ = true;
  stall_diag_.set(fmt::format("storage at {} made no progress for {} s (net.stall_limit is {}): {} {} got no "
                              "answer{}",
                              c.endpoint, whole_seconds(quiet), config::format_duration(settings_.limit),
                              c.operation, c.object, others(calls_.size())));
  act.log(action_types::s3::stalled, {{"endpoint", c.endpoint}, {"operation", c.operation}, {"object", c.object},
                                      {"quiet_s", whole_seconds(quiet)}, {"calls", calls_.size()}});
  // Every other call ends now too.
  for (auto& other : calls_)
    if (other.timer) other.timer->cancel();
}

}  // namespace ferry::net
