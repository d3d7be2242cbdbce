#pragma once
// A one-line progress display on stderr for a terminal: bytes so far, of how many, and the rate.
// It redraws on a timer until stop(); run it beside the work it watches (net::run_all) so it has an owner.
#include "net/s3_transfer.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <string>

namespace ferry::agent {

class progress_bar {
 public:
  progress_bar(boost::asio::any_io_executor io, std::string label, const net::transfer_progress& progress);

  boost::asio::awaitable<void> run();
  void stop();

 private:
  void draw(bool final);

  boost::asio::steady_timer timer_;
  std::string label_;
  const net::transfer_progress& progress_;
  std::chrono::steady_clock::time_point start_;
  bool stopped_ = false;
};

std::string human_bytes(std::uint64_t bytes);

}  // namespace ferry::agent
