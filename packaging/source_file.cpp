#include "packaging/source_file.hpp"

#include "packaging/error.hpp"
#include "packaging/file_hash.hpp"
#include "packaging/file_stat.hpp"

#include <fcntl.h>
#include <fmt/format.h>

#include <algorithm>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace ferry::packaging {
namespace {

std::string errno_text(int e) { return std::generic_category().message(e); }

error_code failure(errc code, std::string message, diagnostics& diag) {
  diag.set(std::move(message));
  return make_error_code(code);
}

// fstat(fd) still shows the regular file entry.key was taken from.
result<void> check_unchanged(int fd, const file_entry& entry, diagnostics& diag) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return failure(errc::unreadable_file,
                   fmt::format("{}: cannot stat {}: {}", entry.path, entry.source, errno_text(errno)), diag);
  if (!S_ISREG(st.st_mode))
    return failure(errc::unreadable_file, fmt::format("{}: {} is not a regular file", entry.path, entry.source),
                   diag);
  if (const auto what = difference(st, entry.key); !what.empty())
    return failure(errc::file_changed,
                   fmt::format("{}: {} changed after it was hashed: {}", entry.path, entry.source, what), diag);
  return {};
}

}  // namespace

result<source_file> source_file::open(const file_entry& entry, diagnostics& diag) {
  unique_fd fd(open_for_reading(entry.source));
  if (fd.get() < 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR)
      return failure(errc::file_changed, fmt::format("{}: {} vanished after it was hashed", entry.path, entry.source),
                     diag);
    return failure(errc::unreadable_file, fmt::format("{}: cannot open {}: {}", entry.path, entry.source, errno_text(e)),
                   diag);
  }
  if (auto same = check_unchanged(fd.get(), entry, diag); !same) return same.error();
  if (entry.content_size() > (1u << 20))
    ::posix_fadvise(fd.get(), static_cast<off_t>(entry.piece_offset), static_cast<off_t>(entry.piece_length),
                    POSIX_FADV_SEQUENTIAL);
  if (entry.is_piece() && ::lseek(fd.get(), static_cast<off_t>(entry.piece_offset), SEEK_SET) < 0)
    return failure(errc::unreadable_file,
                   fmt::format("{}: cannot seek in {}: {}", entry.path, entry.source, errno_text(errno)), diag);
  return source_file(entry, std::move(fd));
}

result<std::string_view> source_file::read_some(std::span<char> buffer, diagnostics& diag) {
  const auto& entry = *entry_;
  // A whole file reads on past its size, so growth shows; a piece stops at its end.
  const auto want = entry.is_piece() ? std::min<std::uint64_t>(buffer.size(), entry.piece_length - read_)
                                     : buffer.size();
  for (;;) {
    const auto n = want == 0 ? 0 : ::read(fd_.get(), buffer.data(), static_cast<std::size_t>(want));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return failure(errc::unreadable_file,
                     fmt::format("{}: cannot read {}: {}", entry.path, entry.source, errno_text(errno)), diag);
    read_ += static_cast<std::uint64_t>(n);
    if (read_ > entry.content_size())
      return failure(errc::file_changed,
                     fmt::format("{}: {} grew past its hashed size of {} bytes", entry.path, entry.source,
                                 entry.key.size), diag);
    if (n > 0) return std::string_view(buffer.data(), static_cast<std::size_t>(n));
    if (read_ != entry.content_size())
      return failure(errc::file_changed,
                     fmt::format("{}: {} shrank from {} to {} bytes while being zipped", entry.path, entry.source,
                                 entry.key.size, entry.piece_offset + read_), diag);
    // Catches rewrites that kept the size but not the mtime, and growth after the last read.
    if (auto same = check_unchanged(fd_.get(), entry, diag); !same) return same.error();
    return std::string_view();
  }
}

}  // namespace ferry::packaging
