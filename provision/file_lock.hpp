#pragma once
// An exclusive flock on a lock file, so that ferry commands running at the same time take turns at a
// read-modify-write of shared state (the node registry, the ssh provider's claims, local node names).
// The lock is a separate file because the state files themselves are replaced by rename, and a lock on a
// replaced inode would guard nothing. The kernel drops the lock when its holder dies, so a crashed
// command never wedges the others.
#include "config/units.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <filesystem>
#include <utility>

namespace ferry::provision {

class file_lock {
 public:
  explicit file_lock(int fd) : fd_(fd) {}
  file_lock(file_lock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  file_lock& operator=(file_lock&&) = delete;
  file_lock(const file_lock&) = delete;
  ~file_lock();

 private:
  int fd_;
};

// Takes the lock on `file` (created if missing, with its directory). It polls rather than blocks, so that
// the I/O thread never sleeps in the kernel and the wait has a deadline: errc::registry_busy naming the
// file once `timeout` has passed.
boost::asio::awaitable<result<file_lock>> lock_file(const std::filesystem::path& file, config::duration timeout,
                                                    diagnostics& diag);

}  // namespace ferry::provision
