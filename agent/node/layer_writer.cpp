#include "agent/node/layer_writer.hpp"

#include "agent/node/entry_name.hpp"
#include "agent/node/error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace ferry::agent::node {
namespace {

constexpr std::size_t max_link_target = 4096;

std::string joined(const std::vector<std::string_view>& dirs, std::size_t count, std::string_view leaf = {}) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (!out.empty()) out.push_back('/');
    out.append(dirs[i]);
  }
  if (!leaf.empty()) {
    if (!out.empty()) out.push_back('/');
    out.append(leaf);
  }
  return out;
}

// Removes `path` (below `root`, '/'-joined) opening each directory on the way with O_NOFOLLOW.
void remove_below(int root, std::string_view path, int flags) {
  packaging::unique_fd held;
  int parent = root;
  for (auto slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/')) {
    const std::string part(path.substr(0, slash));
    packaging::unique_fd next(::openat(parent, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) return;
    held = std::move(next);
    parent = held.get();
    path.remove_prefix(slash + 1);
  }
  ::unlinkat(parent, std::string(path).c_str(), flags);
}

mode_t file_mode(const zip_entry& e) {
  const mode_t bits = e.mode & 0777;  // no set-id or sticky bits from a download
  return bits ? bits : 0644;
}


}  // namespace

mode_t process_umask() {
  static const mode_t mask = [] {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    unsigned value = 022;
    if (f) {
      char line[256];
      while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "Umask: %o", &value) == 1) break;
      std::fclose(f);
    }
    return static_cast<mode_t>(value);
  }();
  return mask;
}

layer_writer::layer_writer(int root, std::string root_path, std::string layer, std::uint64_t layer_bytes)
    : root_(root), root_path_(std::move(root_path)), layer_(std::move(layer)), layer_bytes_(layer_bytes) {}

error_code layer_writer::hostile(std::string_view name, std::string_view why, diagnostics& diag) {
  diag.set(fmt::format("layer {} holds the entry '{}', which {}: refused", layer_, printable_name(name.substr(0, 256)),
                       why));
  return make_error_code(errc::hostile_entry);
}

error_code layer_writer::io_failure(int err, std::string_view doing, std::string_view name, diagnostics& diag) {
  if (err == ENOSPC || err == EDQUOT) {
    struct statvfs fs {};
    const auto free = ::fstatvfs(root_, &fs) == 0 ? std::uint64_t(fs.f_bavail) * fs.f_frsize : 0;
    diag.set(fmt::format("no space left in {}: layer {} needs {} more bytes, {} are free", root_path_, layer_,
                         layer_bytes_ > bytes_written_ ? layer_bytes_ - bytes_written_ : 0, free));
    return make_error_code(errc::disk_full);
  }
  diag.set(fmt::format("layer {}: {} '{}' in {}: {}", layer_, doing, printable_name(name.substr(0, 256)), root_path_,
                       std::strerror(err)));
  return make_error_code(errc::cache_failed);
}

result<int> layer_writer::open_dirs(const std::vector<std::string_view>& dirs, std::string_view name,
                                    diagnostics& diag) {
  std::size_t keep = 0;
  while (keep < open_.size() && keep < dirs.size() && open_[keep].first == dirs[keep]) ++keep;
  open_.resize(keep);
  for (std::size_t i = keep; i < dirs.size(); ++i) {
    const int parent = i == 0 ? root_ : open_[i - 1].second.get();
    const std::string part(dirs[i]);
    if (::mkdirat(parent, part.c_str(), 0755) == 0) made_dirs_.push_back(joined(dirs, i + 1));
    else if (errno != EEXIST) return io_failure(errno, "creating the directory of", name, diag);
    packaging::unique_fd fd(::openat(parent, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == ELOOP || errno == ENOTDIR) return hostile(name, "passes through a symlink or a file", diag);
      return io_failure(errno, "opening the directory of", name, diag);
    }
    open_.emplace_back(part, std::move(fd));
  }
  return dirs.empty() ? root_ : open_.back().second.get();
}

result<void> layer_writer::begin(const zip_entry& entry, diagnostics& diag) {
  auto path = split_entry_name(entry.name, layer_, diag);
  if (!path) return path.error();
  entry_ = &entry;
  link_target_.clear();
  if (path->directory) {
    auto dirs = path->dirs;
    dirs.push_back(path->leaf);
    auto fd = open_dirs(dirs, entry.name, diag);
    if (!fd) return fd.error();
    if (entry.mode & 0777) ::fchmod(*fd, ((entry.mode & 0777) & ~process_umask()) | 0700);
    parent_ = -1;
    return {};
  }
  auto parent = open_dirs(path->dirs, entry.name, diag);
  if (!parent) return parent.error();
  parent_ = *parent;
  leaf_.assign(path->leaf);
  if (entry.is_symlink()) {
    if (entry.size > max_link_target) return hostile(entry.name, "is a symlink with an overlong target", diag);
    return {};
  }
  if (!S_ISREG(entry.mode) && entry.mode != 0 && (entry.mode & S_IFMT) != 0)
    return hostile(entry.name, "is neither a file, a directory nor a symlink", diag);
  if (piece_offset_) return open_piece(entry, diag);
  // Created with its final mode, which the kernel narrows by the umask; the descriptor writes whatever
  // the mode says.
  at_ = 0;
  file_ = packaging::unique_fd(
      ::openat(parent_, leaf_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, file_mode(entry)));
  if (file_.get() < 0) {
    if (errno == EEXIST) return hostile(entry.name, "is there twice (or a symlink holds its name)", diag);
    return io_failure(errno, "creating", entry.name, diag);
  }
  made_files_.push_back(joined(path->dirs, path->dirs.size(), path->leaf));
  return {};
}

result<void> layer_writer::open_piece(const zip_entry& entry, diagnostics& diag) {
  file_ = packaging::unique_fd(::openat(parent_, leaf_.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (file_.get() < 0) {
    if (errno == ELOOP) return hostile(entry.name, "is a piece of a file whose name a symlink holds", diag);
    return io_failure(errno, "opening", entry.name, diag);
  }
  piece_file_.emplace(entry.name, file_mode(entry) & ~process_umask());
  struct stat st {};
  if (::fstat(file_.get(), &st) != 0) return io_failure(errno, "checking", entry.name, diag);
  if (!S_ISREG(st.st_mode)) return hostile(entry.name, "is a piece of something not a file", diag);
  at_ = *piece_offset_;
  return {};
}

result<void> layer_writer::data(std::string_view bytes, diagnostics& diag) {
  if (!entry_ || parent_ < 0) return {};  // a directory's content: nothing
  if (entry_->is_symlink()) {
    link_target_.append(bytes);
    return {};
  }
  while (!bytes.empty()) {
    const auto n = ::pwrite(file_.get(), bytes.data(), bytes.size(), static_cast<off_t>(at_));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_failure(errno, "writing", entry_->name, diag);
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
    at_ += static_cast<std::uint64_t>(n);
    bytes_written_ += static_cast<std::uint64_t>(n);
  }
  return {};
}

result<void> layer_writer::end(diagnostics& diag) {
  const auto* e = std::exchange(entry_, nullptr);
  if (!e || parent_ < 0) return {};
  if (e->is_symlink()) {
    auto path = split_entry_name(e->name, layer_, diag);
    if (!path) return path.error();
    if (link_target_.find('\0') != std::string::npos || !link_stays_inside(*path, link_target_))
      return hostile(e->name, fmt::format("is a symlink to '{}', outside the layer", printable_name(link_target_)), diag);
    if (::symlinkat(link_target_.c_str(), parent_, leaf_.c_str()) != 0) {
      if (errno == EEXIST) return hostile(e->name, "is there twice", diag);
      return io_failure(errno, "creating the symlink", e->name, diag);
    }
    made_files_.push_back(joined(path->dirs, path->dirs.size(), path->leaf));
    bytes_written_ += link_target_.size();
    ++files_written_;
    return {};
  }
  if (::close(file_.release()) != 0) return io_failure(errno, "closing", e->name, diag);
  // A cut file counts once, with its first piece.
  if (!piece_offset_ || *piece_offset_ == 0) ++files_written_;
  return {};
}

result<void> layer_writer::set_mode(int root, std::string_view name, mode_t mode, std::string_view layer,
                                    diagnostics& diag) {
  auto path = split_entry_name(name, layer, diag);
  if (!path) return path.error();
  auto failed = [&] {
    diag.set(fmt::format("layer {}: cannot set the mode of '{}': {}", layer, printable_name(name.substr(0, 256)),
                         std::strerror(errno ? errno : EINVAL)));
    return make_error_code(errc::cache_failed);
  };
  std::vector<packaging::unique_fd> dirs;
  int parent = root;
  for (const auto& part : path->dirs) {
    const std::string component(part);
    dirs.emplace_back(::openat(parent, component.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (dirs.back().get() < 0) return failed();
    parent = dirs.back().get();
  }
  const std::string leaf(path->leaf);
  packaging::unique_fd file(::openat(parent, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  errno = 0;
  if (file.get() < 0 || ::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode) || ::fchmod(file.get(), mode) != 0)
    return failed();
  return {};
}

void layer_writer::undo() {
  file_ = packaging::unique_fd();
  open_.clear();
  entry_ = nullptr;
  parent_ = -1;
  for (auto it = made_files_.rbegin(); it != made_files_.rend(); ++it) remove_below(root_, *it, 0);
  // Innermost first; one that another shard wrote into is not empty, and stays.
  for (auto it = made_dirs_.rbegin(); it != made_dirs_.rend(); ++it) remove_below(root_, *it, AT_REMOVEDIR);
  made_files_.clear();
  made_dirs_.clear();
  bytes_written_ = 0;
  files_written_ = 0;
}

}  // namespace ferry::agent::node
