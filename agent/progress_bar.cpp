#include "agent/progress_bar.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

namespace ferry::agent {

namespace asio = boost::asio;

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

progress_bar::progress_bar(asio::any_io_executor io, std::string label, const net::transfer_progress& progress)
    : timer_(std::move(io)), label_(std::move(label)), progress_(progress), start_(std::chrono::steady_clock::now()) {}

void progress_bar::draw(bool final) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = seconds > 0 ? static_cast<double>(progress_.done) / seconds / 1e6 : 0;
  std::string amount = human_bytes(progress_.done);
  if (progress_.total) amount += " / " + human_bytes(progress_.total);
  std::string bar;
  if (progress_.total) {
    const auto filled = static_cast<int>(30.0 * static_cast<double>(progress_.done) / static_cast<double>(progress_.total));
    bar = "[" + std::string(static_cast<std::size_t>(std::clamp(filled, 0, 30)), '#') +
          std::string(static_cast<std::size_t>(30 - std::clamp(filled, 0, 30)), ' ') + "] ";
  }
  fmt::print(stderr, "\r\x1b[K{} {}{}  {:.1f} MB/s{}", label_, bar, amount, rate, final ? "\n" : "");
}

asio::awaitable<void> progress_bar::run() {
  while (!stopped_) {
    draw(false);
    timer_.expires_after(std::chrono::milliseconds(200));
    error_code ec;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec && !stopped_) co_return;  // cancelled from outside
  }
  draw(true);
}

void progress_bar::stop() {
  stopped_ = true;
  timer_.cancel();
}

}  // namespace ferry::agent
