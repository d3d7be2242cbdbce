#include "agent/node/layer_cache.hpp"

#include "agent/node/error.hpp"
#include "agent/node/make_dirs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::agent::node {
namespace {

error_code cache_error(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::cache_failed);
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  return fmt::format("{}.{}", ::getpid(), counter++);
}

}  // namespace

void remove_tree(int parent, const char* name) {
  if (::unlinkat(parent, name, 0) == 0 || (errno != EISDIR && errno != EPERM)) return;
  const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  if (DIR* d = ::fdopendir(fd)) {
    std::vector<std::string> names;
    while (const auto* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    }
    for (const auto& n : names) remove_tree(::dirfd(d), n.c_str());
    ::closedir(d);
  } else {
    ::close(fd);
  }
  ::unlinkat(parent, name, AT_REMOVEDIR);
}

result<layer_cache> layer_cache::open(std::string dir, diagnostics& diag, mode_t mode) {
  if (dir.empty()) {
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') {
      dir = std::string(xdg) + "/ferry";
    } else if (const char* home = std::getenv("HOME"); home && *home == '/') {
      dir = std::string(home) + "/.cache/ferry";
    } else {
      return cache_error(diag, "neither XDG_CACHE_HOME nor HOME is set on the node: no place for the layer cache");
    }
  }
  layer_cache cache(std::move(dir));
  if (!make_dirs(cache.layers_, mode) || (mode != 0700 && ::chmod(cache.layers_.c_str(), mode) != 0))
    return cache_error(diag, fmt::format("cannot create the layer cache {}: {}", cache.layers_, std::strerror(errno)));
  return cache;
}

std::string layer_cache::layer_dir(std::string_view id) const { return fmt::format("{}/{}", layers_, id); }

bool layer_cache::cached(std::string_view id) const {
  return ::access(fmt::format("{}/{}.done", layers_, id).c_str(), F_OK) == 0;
}

void layer_cache::touch(std::string_view id) const {
  ::utimensat(AT_FDCWD, fmt::format("{}/{}.done", layers_, id).c_str(), nullptr, 0);
}

result<packaging::unique_fd> layer_cache::try_lock(std::string_view id, diagnostics& diag) const {
  const auto path = fmt::format("{}/{}.lock", layers_, id);
  packaging::unique_fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) return cache_error(diag, fmt::format("cannot open the lock {}: {}", path, std::strerror(errno)));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK || errno == EINTR) return packaging::unique_fd();
    return cache_error(diag, fmt::format("cannot lock {}: {}", path, std::strerror(errno)));
  }
  return fd;
}

result<std::string> layer_cache::make_temp(std::string_view id, diagnostics& diag) const {
  // What a dead maker left: its temporary directories, or a layer directory whose marker never came.
  const auto prefix = fmt::format("{}.tmp.", id);
  if (DIR* d = ::opendir(layers_.c_str())) {
    std::vector<std::string> stale;
    while (const auto* e = ::readdir(d)) {
      if (std::string_view(e->d_name).starts_with(prefix)) stale.emplace_back(e->d_name);
    }
    ::closedir(d);
    for (const auto& name : stale) remove(fmt::format("{}/{}", layers_, name));
  }
  if (!cached(id)) remove(layer_dir(id));
  auto temp = fmt::format("{}/{}{}", layers_, prefix, unique_suffix());
  if (::mkdir(temp.c_str(), 0755) != 0)
    return cache_error(diag, fmt::format("cannot create {}: {}", temp, std::strerror(errno)));
  return temp;
}

result<void> layer_cache::commit(std::string_view id, const std::string& temp, std::uint64_t disk_bytes,
                                 diagnostics& diag) const {
  const auto target = layer_dir(id);
  if (::rename(temp.c_str(), target.c_str()) != 0)
    return cache_error(diag, fmt::format("cannot rename {} to {}: {}", temp, target, std::strerror(errno)));
  const auto marker = fmt::format("{}/{}.done", layers_, id);
  const auto marker_temp = fmt::format("{}.{}", marker, unique_suffix());
  packaging::unique_fd fd(::open(marker_temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  const auto text = std::to_string(disk_bytes);
  if (fd.get() < 0 || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      ::close(fd.release()) != 0 || ::rename(marker_temp.c_str(), marker.c_str()) != 0) {
    const int err = errno;
    ::unlink(marker_temp.c_str());
    return cache_error(diag, fmt::format("cannot write the marker {}: {}", marker, std::strerror(err)));
  }
  return {};
}

void layer_cache::remove(const std::string& path) const { remove_tree(AT_FDCWD, path.c_str()); }

std::vector<evicted_layer> layer_cache::evict(std::uint64_t cap, const std::set<std::string>& keep) const {
  struct entry {
    std::string id;
    std::uint64_t bytes;
    timespec used;
  };
  std::vector<entry> layers;
  std::uint64_t total = 0;
  if (DIR* d = ::opendir(layers_.c_str())) {
    while (const auto* e = ::readdir(d)) {
      const std::string_view name(e->d_name);
      if (!ends_with(name, ".done")) continue;
      const auto path = fmt::format("{}/{}", layers_, name);
      struct stat st {};
      char text[32] = {};
      packaging::unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || ::read(fd.get(), text, sizeof text - 1) < 0) continue;
      const auto bytes = std::strtoull(text, nullptr, 10);
      layers.push_back({std::string(name.substr(0, name.size() - 5)), bytes, st.st_mtim});
      total += bytes;
    }
    ::closedir(d);
  }
  std::vector<evicted_layer> out;
  if (cap == 0 || total <= cap) return out;
  std::sort(layers.begin(), layers.end(), [](const entry& a, const entry& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec : a.used.tv_nsec < b.used.tv_nsec;
  });
  for (const auto& l : layers) {
    if (total <= cap) break;
    if (keep.contains(l.id)) continue;
    diagnostics ignored;
    auto lock = try_lock(l.id, ignored);
    if (!lock || lock->get() < 0) continue;  // another run is making or evicting it
    // The marker goes first: from then on nobody takes the directory for a layer.
    if (::unlink(fmt::format("{}/{}.done", layers_, l.id).c_str()) != 0) continue;
    const auto doomed = fmt::format("{}/{}.tmp.{}", layers_, l.id, unique_suffix());
    if (::rename(layer_dir(l.id).c_str(), doomed.c_str()) == 0) remove(doomed);
    total -= std::min(total, l.bytes);
    out.push_back({l.id, l.bytes});
  }
  return out;
}

}  // namespace ferry::agent::node
