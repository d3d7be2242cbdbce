#include "packaging/ignore_file_reader.hpp"

#include "packaging/unique_fd.hpp"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace ferry::packaging {

ignore_file_contents read_ignore_file(int dirfd, const char* name, bool follow_symlink) {
  ignore_file_contents out;
  unique_fd fd(::openat(dirfd, name, O_RDONLY | O_CLOEXEC | (follow_symlink ? 0 : O_NOFOLLOW)));
  if (fd.get() < 0) {
    out.symlink = errno == ELOOP && !follow_symlink;
    return out;
  }
  char buffer[8192];
  for (;;) {
    const auto n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.text.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace ferry::packaging
