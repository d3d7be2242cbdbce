#pragma once
// Ctrl-C in three steps: the first SIGINT or SIGTERM asks the running command to stop (total
// cancellation: every step winds down and ends its action as cancelled); after the grace period from
// config, terminal cancellation cuts off what is still cleaning up; a second signal skips the wait. If
// even that does not end the command within another grace period, the io_context is stopped and the
// coroutine frames are destroyed, which still ends each open action (as cancelled).
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>

namespace ferry::agent {

class shutdown {
 public:
  shutdown(boost::asio::io_context& io, std::chrono::milliseconds grace);

  // The slot to bind to the command's coroutine.
  boost::asio::cancellation_slot slot() { return signal_.slot(); }
  bool interrupted() const { return interrupted_; }
  // Stops listening for signals: the command has finished.
  void done();

 private:
  void wait_for_signal();
  void escalate();

  boost::asio::io_context& io_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer grace_timer_;
  boost::asio::cancellation_signal signal_;
  std::chrono::milliseconds grace_;
  bool interrupted_ = false;
  bool terminal_ = false;
};

}  // namespace ferry::agent
