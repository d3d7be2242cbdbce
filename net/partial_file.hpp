#pragma once
// A download's file while it is being written: created beside its final name (".NAME.ferry-XXXXXXXX.partial",
// in the same directory, so the rename cannot cross file systems) and renamed onto that name only when
// whole. Every path out that does not commit removes it, so no half file is ever left or seen under the
// final name.
#include <fmt/format.h>

#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <unistd.h>

namespace ferry::net {

class partial_file {
 public:
  // fd() < 0 when the file cannot be made; error() is then its errno.
  explicit partial_file(std::filesystem::path target)
      : target_(std::move(target)), temporary_(beside(target_)) {
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) error_ = errno;
  }
  ~partial_file() {
    if (!committed_ && fd_ >= 0) ::unlink(temporary_.c_str());
    if (fd_ >= 0) ::close(fd_);
  }
  partial_file(const partial_file&) = delete;
  partial_file& operator=(const partial_file&) = delete;

  int fd() const { return fd_; }
  int error() const { return error_; }
  const std::filesystem::path& temporary() const { return temporary_; }

  // Gives the contents their final name. False, with errno set, when the rename fails.
  bool commit() {
    committed_ = ::rename(temporary_.c_str(), target_.c_str()) == 0;
    return committed_;
  }

 private:
  static std::filesystem::path beside(const std::filesystem::path& file) {
    std::random_device rd;
    return file.parent_path() / fmt::format(".{}.ferry-{:08x}.partial", file.filename().string(), rd());
  }

  std::filesystem::path target_;
  std::filesystem::path temporary_;
  int fd_ = -1;
  int error_ = 0;
  bool committed_ = false;
};

}  // namespace ferry::net
