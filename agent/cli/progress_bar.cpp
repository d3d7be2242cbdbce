#include "agent/cli/progress_bar.hpp"

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

namespace {

std::string transfer_line(const std::string& label, const net::transfer_progress& progress, double seconds) {
  const double rate = seconds > 0 ? static_cast<double>(progress.done) / seconds / 1e6 : 0;
  std::string amount = human_bytes(progress.done);
  if (progress.total) amount += " / " + human_bytes(progress.total);
  std::string bar;
  if (progress.total) {
    const auto filled = static_cast<int>(30.0 * static_cast<double>(progress.done) / static_cast<double>(progress.total));
    bar = "[" + std::string(static_cast<std::size_t>(std::clamp(filled, 0, 30)), '#') +
          std::string(static_cast<std::size_t>(30 - std::clamp(filled, 0, 30)), ' ') + "] ";
  }
  return fmt::format("{} {}{}  {:.1f} MB/s", label, bar, amount, rate);
}

}  // namespace

progress_bar::progress_bar(asio::any_io_executor io, std::string label, const net::transfer_progress& progress)
    : progress_bar(std::move(io), [label = std::move(label), &progress](double seconds) {
        return transfer_line(label, progress, seconds);
      }) {
  keep_last_ = true;
}

progress_bar::progress_bar(asio::any_io_executor io, line_fn line)
    : timer_(std::move(io)), line_(std::move(line)), start_(std::chrono::steady_clock::now()) {}

void progress_bar::draw(bool final) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  fmt::print(stderr, "\r\x1b[K{}{}", line_(seconds), final ? "\n" : "");
  std::fflush(stderr);
  drawn_ = !final;
}

void progress_bar::clear() {
  if (!drawn_) return;
  fmt::print(stderr, "\r\x1b[K");
  std::fflush(stderr);
  drawn_ = false;
}

asio::awaitable<void> progress_bar::run() {
  while (!stopped_) {
    draw(false);
    timer_.expires_after(std::chrono::milliseconds(200));
    error_code ec;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec && !stopped_) break;  // cancelled from outside
  }
  if (stopped_ && keep_last_)
    draw(true);
  else
    clear();
}

void progress_bar::stop() {
  stopped_ = true;
  timer_.cancel();
}

}  // namespace ferry::agent
