#include "agent/node/shard_tee.hpp"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

namespace ferry::agent::node {
namespace {

constexpr const char* over_marker = "/.over";

void touch(const std::string& path) {
  const int marker = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (marker >= 0) ::close(marker);
}

}  // namespace

void no_copy_of(const std::string& dir, std::string_view sha256) {
  if (!dir.empty()) touch(dir + "/" + std::string(sha256) + ".failed");
}

void copies_over(const std::string& dir) {
  if (!dir.empty()) touch(dir + over_marker);
}

bool copies_are_over(const std::string& dir) { return ::access((dir + over_marker).c_str(), F_OK) == 0; }

shard_tee::shard_tee(const std::string& dir, std::string_view sha256) {
  if (dir.empty()) return;
  done_ = dir + "/" + std::string(sha256);
  part_ = done_ + ".part";
  failed_ = done_ + ".failed";
  ::unlink(failed_.c_str());
  fd_ = ::open(part_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
}

shard_tee::~shard_tee() {
  if (!committed_ && !done_.empty()) give_up();
}

void shard_tee::append(std::string_view bytes) {
  while (fd_ >= 0 && !bytes.empty()) {
    const auto n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd_);
      fd_ = -1;
      ::unlink(part_.c_str());
      return;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void shard_tee::commit() {
  if (fd_ < 0) return;
  const bool closed = ::close(fd_) == 0;
  fd_ = -1;
  if (closed && std::rename(part_.c_str(), done_.c_str()) == 0) {
    committed_ = true;
    return;
  }
  give_up();
}

void shard_tee::give_up() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(part_.c_str());
  // Peers waiting for it learn at once that it will not come from here.
  touch(failed_);
}

}  // namespace ferry::agent::node
