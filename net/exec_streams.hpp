#pragma once
// Where a remote command's output goes and where its input comes from, whatever carries the command
// (net/node_link.hpp). Output arrives in chunks; the command's channel is not read again until the sink
// took the last chunk, so a slow consumer slows the remote command down (the transport's flow control,
// SSH's channel window, holds it back) instead of filling memory.
#include "net/notifier.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace ferry::net {

enum class output_stream { out, err };

// Sinks and sources run inside exec's coroutine: when exec is cancelled, so is what they await. They
// report that (and any failure) as an error code, never by throwing: use redirect_error, not bare
// use_awaitable, for what they wait on.
class output_sink {
 public:
  virtual ~output_sink() = default;
  // One chunk of stdout or stderr. An error ends the command (it is killed) and becomes its result.
  virtual boost::asio::awaitable<error_code> write(output_stream stream, std::span<const char> bytes) = 0;
};

class input_source {
 public:
  virtual ~input_source() = default;
  // Up to into.size() bytes of stdin into `into`; 0 at the end. It is awaited in the loop that also
  // reads the command's output, so it must not wait for that output.
  virtual boost::asio::awaitable<result<std::size_t>> read(std::span<char> into) = 0;

  // Whether read() would return now. A source whose input comes only now and then, and may depend on
  // the output (the stdin of a long-lived worker, written as its replies come), says false while it has
  // nothing: the channel does not call read() then but goes on moving output, and looks again when the
  // source calls the function it was last given by on_ready() (an empty one: nobody is listening).
  virtual bool ready() const { return true; }
  virtual void on_ready(std::function<void()> wake) { (void)wake; }
};

// Keeps stdout and stderr in memory, together up to `max_bytes`; more fails with errc::output_too_large.
class collect_sink final : public output_sink {
 public:
  explicit collect_sink(std::size_t max_bytes = 16 << 20) : max_bytes_(max_bytes) {}
  boost::asio::awaitable<error_code> write(output_stream stream, std::span<const char> bytes) override;

  std::string out;
  std::string err;

 private:
  std::size_t max_bytes_;
};

// Hands each chunk to a function, synchronously.
class callback_sink final : public output_sink {
 public:
  using callback = std::function<void(output_stream, std::string_view)>;
  explicit callback_sink(callback f) : f_(std::move(f)) {}
  boost::asio::awaitable<error_code> write(output_stream stream, std::span<const char> bytes) override;

 private:
  callback f_;
};

// stdin written while the command runs: the input half of a long-lived binary duplex channel. write()
// queues bytes for the command (the writer bounds how many, typically by waiting for each reply);
// close() ends the input once the queue has gone out.
class stream_source final : public input_source {
 public:
  explicit stream_source(boost::asio::any_io_executor io);
  void write(std::string_view bytes);
  void close();

  boost::asio::awaitable<result<std::size_t>> read(std::span<char> into) override;
  bool ready() const override { return !queued_.empty() || closed_; }
  void on_ready(std::function<void()> wake) override { wake_ = std::move(wake); }

 private:
  void notify();

  std::string queued_;
  bool closed_ = false;
  std::function<void()> wake_;
  notifier arrived_;  // wakes a read() that waits
};

// Bytes the caller keeps alive until the command ends.
class buffer_source final : public input_source {
 public:
  explicit buffer_source(std::string_view bytes) : rest_(bytes) {}
  boost::asio::awaitable<result<std::size_t>> read(std::span<char> into) override;

 private:
  std::string_view rest_;
};

}  // namespace ferry::net
