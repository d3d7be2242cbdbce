#include "agent/cli/shutdown.hpp"

#include <csignal>

namespace ferry::agent {

namespace asio = boost::asio;

shutdown::shutdown(asio::io_context& io, std::chrono::milliseconds grace)
    : io_(io), signals_(io, SIGINT, SIGTERM), grace_timer_(io), grace_(grace) {
  wait_for_signal();
}

void shutdown::wait_for_signal() {
  signals_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;  // done() cancelled the wait
    if (!interrupted_) {
      interrupted_ = true;
      signal_.emit(asio::cancellation_type::total);
      grace_timer_.expires_after(grace_);
      grace_timer_.async_wait([this](const boost::system::error_code& timer_ec) {
        if (!timer_ec) escalate();
      });
    } else {
      grace_timer_.cancel();
      escalate();
    }
    wait_for_signal();
  });
}

void shutdown::escalate() {
  if (terminal_) return;
  terminal_ = true;
  signal_.emit(asio::cancellation_type::terminal);
  grace_timer_.expires_after(grace_);
  grace_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) io_.stop();
  });
}

void shutdown::done() {
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  grace_timer_.cancel();
}

}  // namespace ferry::agent
