#pragma once
// The plan's lines from the node program's stdin (a pipe from sshd), as they arrive, on the io_context:
// the layers already there are fetched while ferry is still packing the others, and a signal ends a wait
// for the plan as it ends any other. A line is capped: no plan line is near that long.
#include "tracing/diagnostics.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <optional>
#include <string>

namespace ferry::agent::node {

class line_reader {
 public:
  static constexpr std::size_t max_line = 64 << 20;

  // Takes a descriptor of its own for `fd`.
  line_reader(boost::asio::any_io_executor io, int fd);

  // The next line without its newline, none at the end of the input; operation_aborted once cancel() was
  // called or the wait was cancelled.
  boost::asio::awaitable<result<std::optional<std::string>>> next(diagnostics& diag);
  // Ends a wait of next(), and any later one.
  void cancel();

 private:
  std::optional<std::string> take_line();
  error_code too_long(diagnostics& diag) const;

  boost::asio::posix::stream_descriptor in_;
  std::string buffer_;
  bool eof_ = false;
  bool cancelled_ = false;
};

}  // namespace ferry::agent::node
