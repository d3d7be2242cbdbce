#include "agent/node/staging_dir.hpp"

#include "agent/node/entry_name.hpp"
#include "agent/node/error.hpp"
#include "agent/node/layer_writer.hpp"
#include "agent/node/make_dirs.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace ferry::agent::node {
namespace {

constexpr std::string_view meta_name = ".ferry-stage";
constexpr std::string_view complete_name = ".ferry-stage-complete";

error_code failed(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::cache_failed);
}

packaging::unique_fd open_dir_at(int parent, const char* name) {
  return packaging::unique_fd(::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// The directory that holds `path` below `root`, each step opened with O_NOFOLLOW; created when `create`.
// -1 with errno set when a step is missing (and not to be created), a symlink or a file.
packaging::unique_fd parent_of(int root, const entry_path& path, bool create) {
  packaging::unique_fd at(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  for (const auto& part : path.dirs) {
    const std::string name(part);
    if (create && ::mkdirat(at.get(), name.c_str(), 0777) != 0 && errno != EEXIST) return packaging::unique_fd();
    auto next = open_dir_at(at.get(), name.c_str());
    if (next.get() < 0) return next;
    at = std::move(next);
  }
  return at;
}

std::string record_of(const stage_object& o) { return fmt::format("{} {}\n", o.etag, o.size); }

bool pid_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

}  // namespace

staged_file::staged_file(int tmp_dir, std::string name, packaging::unique_fd fd)
    : tmp_dir_(tmp_dir), name_(std::move(name)), fd_(std::move(fd)) {}

staged_file::staged_file(staged_file&& other) noexcept
    : tmp_dir_(other.tmp_dir_), name_(std::move(other.name_)), fd_(std::move(other.fd_)),
      placed_(std::exchange(other.placed_, true)) {}

staged_file::~staged_file() {
  if (!placed_ && !name_.empty()) ::unlinkat(tmp_dir_, name_.c_str(), 0);
}

result<void> staged_file::restart(diagnostics& diag) {
  if (::ftruncate(fd_.get(), 0) != 0 || ::lseek(fd_.get(), 0, SEEK_SET) != 0)
    return failed(diag, fmt::format("cannot start the download over: {}", std::strerror(errno)));
  return {};
}

result<void> staged_file::write(std::span<const char> bytes, std::string_view what, diagnostics& diag) {
  while (!bytes.empty()) {
    const auto n = ::write(fd_.get(), bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (errno == ENOSPC || errno == EDQUOT) {
        diag.set(fmt::format("cannot write {}: disk full", what));
        return make_error_code(errc::disk_full);
      }
      return failed(diag, fmt::format("cannot write {}: {}", what, std::strerror(errno)));
    }
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
  return {};
}

result<staging_dir> staging_dir::open(const std::string& path, diagnostics& diag) {
  staging_dir d;
  d.path_ = path;
  d.file_mode_ = 0666 & ~process_umask();
  // The node directory is the user's choice: made as `mkdir -p` would.
  if (!make_dirs(path, 0777)) return failed(diag, fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  d.dir_ = packaging::unique_fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.dir_.get() < 0) return failed(diag, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  const std::string meta(meta_name);
  // Only the user reads what the staging keeps for itself.
  if (::mkdirat(d.dir_.get(), meta.c_str(), 0700) != 0 && errno != EEXIST)
    return failed(diag, fmt::format("cannot create {}/{}: {}", path, meta, std::strerror(errno)));
  auto meta_fd = open_dir_at(d.dir_.get(), meta.c_str());
  if (meta_fd.get() < 0) return failed(diag, fmt::format("cannot open {}/{}: {}", path, meta, std::strerror(errno)));
  ::fchmod(meta_fd.get(), 0700);
  for (const char* sub : {"tmp", "etags"}) {
    if (::mkdirat(meta_fd.get(), sub, 0700) != 0 && errno != EEXIST)
      return failed(diag, fmt::format("cannot create {}/{}/{}: {}", path, meta, sub, std::strerror(errno)));
  }
  d.tmp_ = open_dir_at(meta_fd.get(), "tmp");
  d.etags_ = open_dir_at(meta_fd.get(), "etags");
  if (d.tmp_.get() < 0 || d.etags_.get() < 0)
    return failed(diag, fmt::format("cannot open {}/{}: {}", path, meta, std::strerror(errno)));
  d.sweep();
  return d;
}

// Temporary files are named `<pid>.<n>`: those of a process that is gone were left by a staging that was
// killed, and go.
void staging_dir::sweep() {
  const int fd = ::fcntl(tmp_.get(), F_DUPFD_CLOEXEC, 0);
  DIR* dir = ::fdopendir(fd);
  if (!dir) {
    ::close(fd);
    return;
  }
  while (const auto* e = ::readdir(dir)) {
    const std::string_view name(e->d_name);
    if (name == "." || name == "..") continue;
    const long pid = std::strtol(e->d_name, nullptr, 10);
    if (!pid_alive(pid)) ::unlinkat(tmp_.get(), e->d_name, 0);
  }
  ::closedir(dir);
}

bool staging_dir::holds(const stage_object& o) const {
  diagnostics ignored;
  auto path = split_entry_name(o.path, "", ignored);
  if (!path) return false;
  const std::string leaf(path->leaf);
  auto parent = parent_of(dir_.get(), *path, false);
  struct stat st {};
  if (parent.get() < 0 || ::fstatat(parent.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != o.size)
    return false;
  auto record_dir = parent_of(etags_.get(), *path, false);
  if (record_dir.get() < 0) return false;
  packaging::unique_fd record(::openat(record_dir.get(), leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (record.get() < 0) return false;
  char text[512];
  const auto n = ::read(record.get(), text, sizeof text);
  return n > 0 && std::string_view(text, static_cast<std::size_t>(n)) == record_of(o);
}

bool staging_dir::present(std::string_view name) const {
  diagnostics ignored;
  auto path = split_entry_name(name, "", ignored);
  if (!path) return false;
  auto parent = parent_of(dir_.get(), *path, false);
  struct stat st {};
  return parent.get() >= 0 && ::fstatat(parent.get(), std::string(path->leaf).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

void staged_file::close() { fd_ = packaging::unique_fd(); }

result<staged_file> staging_dir::create(diagnostics& diag) {
  for (;;) {
    auto name = fmt::format("{}.{}", ::getpid(), next_++);
    packaging::unique_fd fd(::openat(tmp_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() >= 0) return staged_file(tmp_.get(), std::move(name), std::move(fd));
    if (errno != EEXIST)
      return failed(diag, fmt::format("cannot create a file under {}/{}/tmp: {}", path_, meta_name, std::strerror(errno)));
  }
}

result<void> staging_dir::place(staged_file& file, const stage_object& o, diagnostics& diag) {
  auto path = split_entry_name(o.path, path_, diag);
  if (!path) return path.error();
  const std::string leaf(path->leaf);
  const auto shown = printable_name(o.path);
  auto parent = parent_of(dir_.get(), *path, true);
  if (parent.get() < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      diag.set(fmt::format("the object {} would pass through a symlink or a file under {}: refused", shown, path_));
      return make_error_code(errc::hostile_entry);
    }
    return failed(diag, fmt::format("cannot create the directory of {} under {}: {}", shown, path_, std::strerror(errno)));
  }
  ::fchmodat(file.tmp_dir_, file.name_.c_str(), file_mode_, 0);
  // The old record goes first: a staging killed between the two renames fetches the object again.
  if (auto records = parent_of(etags_.get(), *path, true); records.get() >= 0) {
    ::unlinkat(records.get(), leaf.c_str(), 0);
    if (::renameat(file.tmp_dir_, file.name_.c_str(), parent.get(), leaf.c_str()) != 0)
      return failed(diag, fmt::format("cannot put {} in place under {}: {}", shown, path_, std::strerror(errno)));
    file.placed_ = true;
    packaging::unique_fd record(
        ::openat(records.get(), leaf.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    const auto text = record_of(o);
    if (record.get() >= 0 && ::write(record.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
      ::unlinkat(records.get(), leaf.c_str(), 0);  // a torn record would only cost a download; none is safer
    return {};
  }
  if (::renameat(file.tmp_dir_, file.name_.c_str(), parent.get(), leaf.c_str()) != 0)
    return failed(diag, fmt::format("cannot put {} in place under {}: {}", shown, path_, std::strerror(errno)));
  file.placed_ = true;
  return {};
}

void staging_dir::clear_complete() { ::unlinkat(dir_.get(), std::string(complete_name).c_str(), 0); }

result<void> staging_dir::mark_complete(diagnostics& diag) {
  packaging::unique_fd fd(::openat(dir_.get(), std::string(complete_name).c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (fd.get() < 0)
    return failed(diag, fmt::format("cannot write {}/{}: {}", path_, complete_name, std::strerror(errno)));
  return {};
}

}  // namespace ferry::agent::node
