#pragma once
// The node program's side of the import hook (import_gate.hpp has the requests): a Unix socket in a
// private directory (0700, made with mkdtemp, removed at the end) that the command's Python processes
// connect to, one request per connection. A request that must wait for layers waits here, on the
// io_context, until the gate changes; its layers go first in the node's queue (`prefer`). Each such wait is
// a ferry:materialise:import_wait action; the first hello is a ferry:materialise:command_started message.
//
// The hook's source is written where the command's PYTHONPATH finds it first: <cache>/hook/<digest>/, made
// once per hook version and never changed after.
#include "agent/node/import_gate.hpp"
#include "net/notifier.hpp"
#include "tracing/action.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>

#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

namespace ferry::agent::node {

namespace asio = boost::asio;

class import_server {
 public:
  using prefer_fn = std::function<void(const std::vector<std::string>& ids)>;

  // Listens in a new private directory under $TMPDIR (or /tmp): a socket's path must stay short.
  static result<std::unique_ptr<import_server>> open(asio::any_io_executor io, import_gate& gate, prefer_fn prefer,
                                                     diagnostics& diag);
  ~import_server();
  import_server(const import_server&) = delete;
  import_server& operator=(const import_server&) = delete;

  const std::string& socket_path() const { return path_; }

  // Accepts and answers until close(); returns once every connection has ended.
  asio::awaitable<void> serve(tracing::action& act);
  // The gate changed: every waiting request looks again.
  void changed();
  // No more requests: the listener and every connection close, waiting ones answered as they stand.
  void close();

 private:
  import_server(asio::any_io_executor io, import_gate& gate, prefer_fn prefer, std::string dir);
  asio::awaitable<void> answer(tracing::action& act, asio::local::stream_protocol::socket socket);
  asio::awaitable<bool> wait_change(std::uint64_t seen);

  import_gate& gate_;
  prefer_fn prefer_;
  std::string dir_, path_;
  asio::local::stream_protocol::acceptor acceptor_;
  net::notifier changed_;  // wakes every waiting request
  net::notifier drained_;  // notified when the last connection ends after close()
  struct connection {
    asio::local::stream_protocol::socket* socket;
    bool reading;  // its request not read yet
  };
  std::list<connection> open_;
  std::exception_ptr bug_;
  std::size_t connections_ = 0;
  bool closed_ = false;
  bool started_ = false;  // the first hello came
};

}  // namespace ferry::agent::node
