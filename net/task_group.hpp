#pragma once
// Coroutines started while their owner runs (a connection per accept, a worker per node that joins), each
// with a cancellation slot of its own. The owner ends them: cancel() asks each to stop (total
// cancellation), and wait() returns once every one has ended, so none outlives the frame it refers to.
// Everything here runs on one executor (ferry's I/O thread).
#include "net/notifier.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <cstddef>
#include <list>

namespace ferry::net {

class task_group {
 public:
  explicit task_group(boost::asio::any_io_executor io);
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;
  // Running members are a bug here: their frames would refer to a group that is gone.
  ~task_group();

  // Starts `work`, accepting total cancellation for it. An exception it throws is a bug: it ends the
  // program, as an unowned one would.
  void spawn(boost::asio::awaitable<void> work);
  // Every running member is asked to stop; later spawns are cancelled at once.
  void cancel();
  std::size_t running() const { return signals_.size(); }
  // Until every member has ended. Not cancellable: the members refer to the caller's frame. A terminal
  // cancellation of the caller goes on to every member; with `pass_on_total`, a total one does too (cancel():
  // the members are the caller's own work, as a map's added nodes are, and Ctrl-C's first step is total).
  boost::asio::awaitable<void> wait(bool pass_on_total = false);

 private:
  boost::asio::any_io_executor io_;
  std::list<boost::asio::cancellation_signal> signals_;
  notifier ended_;  // notified when a member ends
  bool cancelled_ = false;
};

}  // namespace ferry::net
