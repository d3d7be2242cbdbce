#pragma once
// An asynchronous JSON-lines sink. Producers append finished lines to a memory buffer under a short lock
// and never touch the file; a writer thread owned by the sink does the I/O. flush() (and the destructor)
// writes everything out, so every exit path that unwinds through the sink's owner leaves a whole file.
#include "tracing/diagnostics.hpp"

#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace ferry::tracing {

class sink {
 public:
  // Appends to `path` (created with mode 0600: traces may name private hosts and paths).
  static result<std::unique_ptr<sink>> open(const std::filesystem::path& path, diagnostics& diag);
  // Writes to an open descriptor it then owns (a pipe: a node program's stdout); `label` names it.
  static std::unique_ptr<sink> adopt(int fd, std::filesystem::path label);
  // Formats nothing to disk: for measuring the cost of tracing itself.
  static std::unique_ptr<sink> discard();

  sink(const sink&) = delete;
  sink& operator=(const sink&) = delete;
  ~sink();

  // Queues one line (without its newline). Thread-safe; never waits for I/O.
  void write(std::string_view line);
  // Writes out everything queued so far. Blocks: call it at exit, not on the io_context.
  void flush();
  // Has the writer thread write out what is queued now rather than at its next round (a line someone is
  // waiting for). Never waits.
  void nudge();

  const std::filesystem::path& path() const { return path_; }
  // The first write failure, if any (a full disk); lines after it are dropped.
  error_code error() const;

  // On std::terminate, flush this sink before aborting, so a crash still leaves its trace.
  void flush_on_terminate();

 private:
  sink(int fd, std::filesystem::path path);
  void writer_loop();
  void write_out(std::string& pending);

  int fd_;
  std::filesystem::path path_;
  mutable std::mutex buffer_mutex_;
  std::condition_variable wake_;
  std::string buffer_;
  bool stopping_ = false;
  bool urgent_ = false;  // nudge(): write out now
  mutable std::mutex io_mutex_;  // orders the writer thread's and flush()'s writes
  error_code error_;
  std::thread writer_;
};

}  // namespace ferry::tracing
