#include "tracing/sink.hpp"

#include "tracing/error.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <unistd.h>

namespace ferry::tracing {
namespace {

// The writer wakes when this much is queued, or after the interval below, whichever comes first.
constexpr std::size_t wake_threshold = 256 * 1024;
constexpr auto wake_interval = std::chrono::milliseconds(100);

std::atomic<sink*> terminate_sink{nullptr};
std::terminate_handler previous_terminate = nullptr;

}  // namespace

result<std::unique_ptr<sink>> sink::open(const std::filesystem::path& path, diagnostics& diag) {
  std::error_code fs_ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), fs_ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    diag.set(fmt::format("cannot open trace file {}: {}", path.string(), std::strerror(errno)));
    return make_error_code(errc::cannot_write);
  }
  return std::unique_ptr<sink>(new sink(fd, path));
}

std::unique_ptr<sink> sink::adopt(int fd, std::filesystem::path label) {
  return std::unique_ptr<sink>(new sink(fd, std::move(label)));
}

std::unique_ptr<sink> sink::discard() { return std::unique_ptr<sink>(new sink(-1, {})); }

sink::sink(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {
  buffer_.reserve(wake_threshold * 2);
  writer_ = std::thread([this] { writer_loop(); });
}

sink::~sink() {
  {
    std::lock_guard lock(buffer_mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  writer_.join();
  flush();
  sink* self = this;
  terminate_sink.compare_exchange_strong(self, nullptr);
  if (fd_ >= 0) ::close(fd_);
}

void sink::write(std::string_view line) {
  bool wake = false;
  {
    std::lock_guard lock(buffer_mutex_);
    const bool below = buffer_.size() < wake_threshold;
    buffer_.append(line);
    buffer_.push_back('\n');
    wake = below && buffer_.size() >= wake_threshold;
  }
  if (wake) wake_.notify_one();
}

void sink::nudge() {
  {
    std::lock_guard lock(buffer_mutex_);
    urgent_ = true;
  }
  wake_.notify_one();
}

void sink::writer_loop() {
  std::string pending;
  pending.reserve(wake_threshold * 2);
  std::unique_lock lock(buffer_mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, wake_interval,
                   [this] { return stopping_ || urgent_ || buffer_.size() >= wake_threshold; });
    urgent_ = false;
    if (buffer_.empty()) continue;
    pending.swap(buffer_);
    lock.unlock();
    {
      std::lock_guard io(io_mutex_);
      write_out(pending);
    }
    pending.clear();
    lock.lock();
  }
}

void sink::flush() {
  std::lock_guard io(io_mutex_);
  std::string pending;
  {
    std::lock_guard lock(buffer_mutex_);
    pending.swap(buffer_);
  }
  write_out(pending);
}

void sink::write_out(std::string& pending) {
  if (fd_ < 0 || pending.empty()) return;
  const char* data = pending.data();
  std::size_t left = pending.size();
  while (left > 0 && !error_) {
    const auto n = ::write(fd_, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      error_ = make_error_code(errc::cannot_write);
      break;
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
}

error_code sink::error() const {
  std::lock_guard lock(io_mutex_);
  return error_;
}

void sink::flush_on_terminate() {
  terminate_sink.store(this);
  auto handler = +[] {
    if (auto* s = terminate_sink.load()) s->flush();
    if (previous_terminate) previous_terminate();
    std::abort();
  };
  auto previous = std::set_terminate(handler);
  if (previous != handler) previous_terminate = previous;
}

}  // namespace ferry::tracing
