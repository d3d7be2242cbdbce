#pragma once
// A one-line progress display on stderr for a terminal, redrawn on a timer until stop(); run it beside the
// work it watches (net::run_all) so it has an owner. The line is the caller's (`line_fn`, given the seconds
// since the bar began), or for a transfer: bytes so far, of how many, and the rate.
#include "net/s3_transfer.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <string>

namespace ferry::agent {

class progress_bar {
 public:
  using line_fn = std::function<std::string(double seconds)>;

  // A transfer's bar: its last state stays on the terminal when it ends.
  progress_bar(boost::asio::any_io_executor io, std::string label, const net::transfer_progress& progress);
  // Any line: erased when the bar ends, so that what the command prints next starts on a clean line.
  progress_bar(boost::asio::any_io_executor io, line_fn line);

  boost::asio::awaitable<void> run();
  void stop();
  // Erases the line until the next redraw, for a line of other output to take its place.
  void clear();

 private:
  void draw(bool final);

  boost::asio::steady_timer timer_;
  line_fn line_;
  bool keep_last_ = false;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  bool stopped_ = false;
};

std::string human_bytes(std::uint64_t bytes);

}  // namespace ferry::agent
