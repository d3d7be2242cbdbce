#pragma once
// A remote command's output on this terminal. With one node the bytes pass through untouched; with
// several, each complete line is prefixed with the node's name, so lines of different nodes never mix
// within a line (a partial last line is flushed with its prefix when the command ends).
#include "net/exec_streams.hpp"

#include <functional>
#include <string>

namespace ferry::agent {

class node_output final : public net::output_sink {
 public:
  // An empty prefix passes bytes through as they come.
  explicit node_output(std::string prefix) : prefix_(std::move(prefix)) {}
  // Called once, when the command's first output arrives (the start-up line's "first line at").
  node_output(std::string prefix, std::function<void()> on_first) : prefix_(std::move(prefix)),
                                                                     on_first_(std::move(on_first)) {}
  ~node_output() override { flush(); }

  boost::asio::awaitable<error_code> write(net::output_stream stream, std::span<const char> bytes) override;
  void flush();

 private:
  void emit(net::output_stream stream, std::string_view text);

  std::string prefix_;
  std::function<void()> on_first_;
  std::string pending_out_;
  std::string pending_err_;
};

// Writes all of `text` to the file descriptor (1 or 2), through EINTR and short writes.
error_code write_all(int fd, std::string_view text);

}  // namespace ferry::agent
