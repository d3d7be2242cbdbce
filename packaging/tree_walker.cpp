#include "packaging/tree_walker.hpp"

#include "packaging/error.hpp"
#include "packaging/file_stat.hpp"
#include "packaging/git_repository.hpp"
#include "packaging/ignore_file_reader.hpp"
#include "packaging/unique_fd.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ferry::packaging {
namespace {

namespace fs = std::filesystem;

std::string join(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  std::string out;
  out.reserve(dir.size() + 1 + name.size());
  out.append(dir).append(1, '/').append(name);
  return out;
}

// Enters `rel_dir` in the rules with its ignore files, or with none where they are not read. An ignore file
// that is a symlink is not read, as git does not read one.
void push_ignore_files(ignore_rules& rules, int dirfd, const std::string& rel_dir, bool read_files,
                       std::vector<walk_warning>* warnings, bool through_link = false) {
  if (!read_files || dirfd < 0) {
    rules.push_directory(rel_dir, {}, {}, through_link);
    return;
  }
  auto gitignore = read_ignore_file(dirfd, ".gitignore", false);
  auto ferryignore = read_ignore_file(dirfd, ".ferryignore", false);
  if (warnings) {
    for (const auto& [name, contents] : {std::pair{".gitignore", &gitignore}, std::pair{".ferryignore", &ferryignore}}) {
      if (contents->symlink) warnings->push_back({join(rel_dir, name), "a symlink: not read as an ignore file (git does not read one either)"});
    }
  }
  rules.push_directory(rel_dir, gitignore.text, ferryignore.text, through_link);
}

// The ignore files git applies to `root` from outside it, when the root's ignore files are read at all.
std::vector<outer_ignore_file> outer_files_for(const fs::path& root, const walk_options& options) {
  if (!options.read_ignore_files) return {};
  return outer_ignore_files(root, git_environment::from_process());
}

// The registered submodules of the root's repository, as paths from the root: a nested repository among
// them ships its files, under its own repository's rules; any other nested repository does not ship.
std::set<std::string> submodules_below(const fs::path& root, const walk_options& options) {
  if (!options.read_ignore_files) return {};
  std::error_code ec;
  const auto real = fs::canonical(root, ec);
  if (ec) return {};
  const auto repo = find_git_repository(real);
  if (!repo) return {};
  const auto from_top = real.lexically_relative(repo->top).generic_string();
  const std::string prefix = from_top == "." ? "" : from_top + "/";
  std::set<std::string> out;
  for (auto& path : submodule_paths(*repo)) {
    if (path.size() > prefix.size() && path.starts_with(prefix)) out.insert(path.substr(prefix.size()));
  }
  return out;
}

// Says that git ignores the root (or a directory above it) while ferry packs it: for the pack-time warning
// and for --explain.
std::string ancestor_note(const fs::path& root, const excluded_ancestor& a) {
  std::error_code ec;
  auto dir = fs::canonical(root, ec);
  if (ec) dir = fs::absolute(root, ec);
  for (std::size_t i = 0; i < a.levels_up; ++i) dir = dir.parent_path();
  return fmt::format("git ignores {} ({}), so git lists none of this workspace's files; ferry packs them all the "
                     "same (see docs/packing.md, Excludes)",
                     dir.string(), a.rule.describe());
}

constexpr std::string_view nested_repository_note =
    "a git repository of its own, which git lists as one entry (a submodule registered in .gitmodules ships)";

// Whether the walker keeps a symlink as a link: its target is relative and resolves inside the root, and it
// is not below a followed link. Others are followed (or refused).
bool kept_as_symlink(std::string_view root_real, std::string_view resolved, std::string_view target, bool followed) {
  const bool inside = resolved.size() > root_real.size() && resolved.starts_with(root_real) &&
                      resolved[root_real.size()] == '/';
  return !followed && inside && !target.starts_with('/');
}

struct dir_item {
  std::string name;
  unsigned char type;
};

// The entries of an open directory, straight from getdents64 on the walker's own fd: no dup, no DIR
// stream, no fstat behind fdopendir's back (three system calls a directory, on trees of thousands).
result<std::vector<dir_item>> read_directory(int dirfd, std::string_view where, diagnostics& diag) {
  // The kernel's linux_dirent64: u64 inode, s64 offset, u16 record length, u8 type, then the name.
  constexpr std::size_t reclen_at = 16, type_at = 18, name_at = 19;
  alignas(8) char buffer[32768];
  std::vector<dir_item> items;
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dirfd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      diag.set(fmt::format("{}: cannot list the directory: {}", where, std::strerror(errno)));
      return error_code(errc::unreadable_file);
    }
    if (n == 0) break;
    for (long at = 0; at < n;) {
      unsigned short reclen = 0;
      std::memcpy(&reclen, buffer + at + reclen_at, sizeof reclen);
      const auto type = static_cast<unsigned char>(buffer[at + type_at]);
      const char* name = buffer + at + name_at;
      at += reclen;
      if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
      items.push_back({name, type});
    }
  }
  return items;
}

bool has_item(const std::vector<dir_item>& items, std::string_view name) {
  return std::any_of(items.begin(), items.end(), [&](const dir_item& i) { return i.name == name; });
}

class walker {
 public:
  walker(const fs::path& root, const walk_options& options, diagnostics& diag)
      : options_(options), rules_(options.ignore, outer_files_for(root, options)), diag_(diag), root_(root.string()),
        submodules_(submodules_below(root, options)) {
    while (root_.size() > 1 && root_.ends_with('/')) root_.pop_back();
  }

  result<walk_result> run(std::span<const std::string> only) {
    if (const auto ancestor = rules_.ancestor_excluded(); ancestor && only.empty()) {
      warn("", ancestor_note(root_, *ancestor));
    }
    unique_fd fd(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0) {
      diag_.set(fmt::format("{}: {}", root_, std::strerror(errno)));
      return error_code(errno == ENOTDIR ? errc::not_a_directory : errc::unreadable_file);
    }
    if (only.size() == 1) {
      // One top-level name of a big directory (a site-packages package): visit it without listing the
      // whole root again for every package.
      if (auto r = walk_single(fd.get(), only.front()); !r) return r.error();
    } else if (auto r = walk_directory(fd.get(), "", root_, false, only); !r) {
      return r.error();
    }
    std::sort(out_.files.begin(), out_.files.end(),
              [](const file_entry& a, const file_entry& b) { return a.path < b.path; });
    return std::move(out_);
  }

 private:
  result<void> walk_directory(int dirfd, const std::string& rel_dir, const std::string& abs_dir, bool followed,
                              std::span<const std::string> only, bool through_link = false) {
    struct stat self {};
    if (::fstat(dirfd, &self) != 0) return unreadable(abs_dir);
    auto items = read_directory(dirfd, abs_dir, diag_);
    if (!items) return items.error();
    // git does not descend into a repository below its top level (the listing says whether to look).
    if (!rel_dir.empty() && options_.read_ignore_files && has_item(*items, ".git") && is_repository_dir(abs_dir)) {
      return nested_repository(rel_dir, abs_dir);
    }
    active_.push_back({self.st_dev, self.st_ino});
    // Only open the ignore files the listing holds: most directories have neither.
    const bool ignore_files = has_item(*items, ".gitignore") || has_item(*items, ".ferryignore");
    push_ignore_files(rules_, ignore_files ? dirfd : -1, rel_dir, options_.read_ignore_files, &out_.warnings,
                      through_link);
    for (const auto& item : *items) {
      if (!only.empty() && std::find(only.begin(), only.end(), item.name) == only.end()) continue;
      if (auto r = visit(dirfd, rel_dir, abs_dir, item, followed); !r) return r;
    }
    rules_.pop_directory();
    active_.pop_back();
    return {};
  }

  // A registered submodule is walked as a workspace of its own, under its own repository's ignore files (as
  // git would list its files when run inside it); another nested repository is left out, with a warning.
  result<void> nested_repository(const std::string& rel_dir, const std::string& abs_dir) {
    if (!submodules_.count(rel_dir)) {
      warn(rel_dir, fmt::format("not packed: {}", nested_repository_note));
      return {};
    }
    walker inner(abs_dir, options_, diag_);
    inner.active_ = active_;
    auto walked = inner.run({});
    if (!walked) return walked.error();
    for (auto& f : walked->files) {
      f.path = join(rel_dir, f.path);
      out_.files.push_back(std::move(f));
    }
    for (auto& w : walked->warnings) warn(join(rel_dir, w.path), std::move(w.message));
    out_.bytes += walked->bytes;
    return {};
  }

  result<void> walk_single(int rootfd, const std::string& name) {
    struct stat self {};
    if (::fstat(rootfd, &self) != 0) return unreadable(root_);
    active_.push_back({self.st_dev, self.st_ino});
    push_ignore_files(rules_, rootfd, "", options_.read_ignore_files, &out_.warnings);
    return visit(rootfd, "", root_, dir_item{name, DT_UNKNOWN}, false);
  }

  result<void> visit(int dirfd, const std::string& rel_dir, const std::string& abs_dir, const dir_item& item,
                     bool followed) {
    unsigned char type = item.type;
    const std::string rel = join(rel_dir, item.name);
    // An excluded file is never stat'ed: the listing already says it is not a directory.
    if (type == DT_REG && rules_.ignored(rel, false)) return {};
    struct stat st {};
    if (type == DT_UNKNOWN || type == DT_REG) {
      if (::fstatat(dirfd, item.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return {};  // gone before we looked: never part of this snapshot
        return unreadable(join(abs_dir, item.name));
      }
      type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : S_ISLNK(st.st_mode) ? DT_LNK : DT_FIFO;
    }
    if (item.type != DT_REG && rules_.ignored(rel, type == DT_DIR)) return {};
    switch (type) {
      case DT_DIR: return enter(dirfd, rel, join(abs_dir, item.name), item.name, followed);
      case DT_REG: add_file(rel, join(abs_dir, item.name), st);
        return {};
      case DT_LNK: return symlink(dirfd, rel, join(abs_dir, item.name), item.name, followed);
      default:
        warn(rel, "not a regular file, directory or symlink: skipped");
        return {};
    }
  }

  result<void> enter(int dirfd, const std::string& rel, const std::string& abs, const std::string& name,
                     bool followed) {
    unique_fd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == ENOENT) return {};
      return unreadable(abs);
    }
    return walk_directory(fd.get(), rel, abs, followed, {});
  }

  void add_file(const std::string& rel, std::string source, const struct stat& st) {
    file_entry entry;
    entry.path = rel;
    entry.type = file_entry::kind::regular;
    entry.permissions = st.st_mode & 07777;
    entry.source = std::move(source);
    entry.key = key_of(st);
    out_.bytes += entry.key.size;
    if (entry.key.size > options_.large_file_warning) {
      warn(rel, fmt::format("large file ({} MiB): exclude it if it is data the job downloads itself",
                            entry.key.size >> 20));
    }
    out_.files.push_back(std::move(entry));
  }

  result<void> symlink(int dirfd, const std::string& rel, const std::string& abs, const std::string& name,
                       bool followed) {
    std::string target(PATH_MAX, '\0');
    const auto n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
    if (n < 0) {
      if (errno == ENOENT) return {};
      return unreadable(abs);
    }
    target.resize(static_cast<std::size_t>(n));
    char real[PATH_MAX];
    if (!::realpath(abs.c_str(), real)) {
      if (errno == ELOOP) {
        diag_.set(fmt::format("{}: symlink loop ({} -> {})", abs, rel, target));
        return error_code(errc::symlink_loop);
      }
      if (errno != ENOENT) return unreadable(abs);
      warn(rel, fmt::format("dangling symlink to {}: kept as a symlink", target));
      keep_symlink(rel, target);
      return {};
    }
    if (root_real_.empty()) {
      char root_real[PATH_MAX];
      if (!::realpath(root_.c_str(), root_real)) return unreadable(root_);
      root_real_ = root_real;
    }
    if (kept_as_symlink(root_real_, real, target, followed)) {
      keep_symlink(rel, target);
      return {};
    }
    if (!options_.follow_external) {
      diag_.set(fmt::format("{}: symlink to {} leaves {}; set packaging.external_symlinks = \"follow\" or exclude it",
                            abs, target, root_));
      return error_code(errc::external_symlink);
    }
    return follow(rel, std::string(real), target);
  }

  result<void> follow(const std::string& rel, const std::string& real, const std::string& target) {
    struct stat st {};
    if (::stat(real.c_str(), &st) != 0) return unreadable(real);
    if (S_ISREG(st.st_mode)) {
      add_file(rel, real, st);
      return {};
    }
    if (!S_ISDIR(st.st_mode)) {
      warn(rel, "symlink to something that is not a regular file or directory: skipped");
      return {};
    }
    for (const auto& [dev, ino] : active_) {
      if (dev == st.st_dev && ino == st.st_ino) {
        diag_.set(fmt::format("{}: symlink loop: {} -> {} leads back into a directory being packed",
                              join(root_, rel), rel, target));
        return error_code(errc::symlink_loop);
      }
    }
    unique_fd fd(::open(real.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0) return unreadable(real);
    return walk_directory(fd.get(), rel, real, true, {}, true);
  }

  void keep_symlink(const std::string& rel, const std::string& target) {
    file_entry entry;
    entry.path = rel;
    entry.type = file_entry::kind::symlink;
    entry.permissions = 0777;
    entry.link_target = target;
    entry.key.size = target.size();
    out_.files.push_back(std::move(entry));
  }

  result<void> unreadable(const std::string& path) {
    diag_.set(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
    return error_code(errc::unreadable_file);
  }

  void warn(const std::string& rel, std::string message) { out_.warnings.push_back({rel, std::move(message)}); }

  const walk_options& options_;
  ignore_rules rules_;
  diagnostics& diag_;
  std::string root_;
  std::string root_real_;  // resolved on the first symlink: most trees have none
  std::set<std::string> submodules_;             // registered submodules, from the root
  std::vector<std::pair<dev_t, ino_t>> active_;  // directories being walked, to catch loops through symlinks
  walk_result out_;
};

}  // namespace

result<walk_result> walk_tree(const fs::path& root, const walk_options& options, diagnostics& diag,
                              std::span<const std::string> only) {
  walker w(root, options, diag);
  return w.run(only);
}

result<std::vector<std::pair<std::string, bool>>> list_top_level(const fs::path& root, diagnostics& diag) {
  unique_fd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    diag.set(fmt::format("{}: {}", root.string(), std::strerror(errno)));
    return error_code(errno == ENOTDIR ? errc::not_a_directory : errc::unreadable_file);
  }
  auto items = read_directory(fd.get(), root.string(), diag);
  if (!items) return items.error();
  std::vector<std::pair<std::string, bool>> out;
  out.reserve(items->size());
  for (auto& item : *items) {
    bool is_dir = item.type == DT_DIR;
    if (item.type == DT_UNKNOWN || item.type == DT_LNK) {
      struct stat st {};
      is_dir = ::fstatat(fd.get(), item.name.c_str(), &st, 0) == 0 && S_ISDIR(st.st_mode);
    }
    out.emplace_back(std::move(item.name), is_dir);
  }
  return out;
}

namespace {

std::string verdict(const std::optional<explanation>& decided) {
  if (!decided) return "included (no rule matches)";
  return fmt::format("{} by {}", decided->negated ? "included" : "excluded", decided->describe());
}

// Follows `path` from the root one component at a time as the walker would reach it: lstat, never through
// a symlink it keeps as a link, through one it follows, reading the ignore files of each directory.
class path_explainer {
 public:
  path_explainer(const fs::path& root, const walk_options& options)
      : options_(options), rules_(options.ignore, outer_files_for(root, options)), root_(root.string()),
        submodules_(submodules_below(root, options)) {
    while (root_.size() > 1 && root_.ends_with('/')) root_.pop_back();
  }

  // The path's verdict, and when git ignores the workspace itself, that too: git would list nothing here.
  result<std::string> run(const std::string& path, diagnostics& diag) {
    auto why = walk(path, diag);
    if (!why) return why;
    if (const auto ancestor = rules_.ancestor_excluded()) *why += "; but " + ancestor_note(root_, *ancestor);
    return why;
  }

 private:
  result<std::string> walk(const std::string& path, diagnostics& diag) {
    path_ = path;
    dir_ = unique_fd(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir_.get() < 0) {
      diag.set(fmt::format("{}: {}", root_, std::strerror(errno)));
      return error_code(errno == ENOTDIR ? errc::not_a_directory : errc::unreadable_file);
    }
    abs_dir_ = root_;
    push_ignore_files(rules_, dir_.get(), "", options_.read_ignore_files, nullptr);
    for (std::size_t start = 0;;) {
      const auto slash = path.find('/', start);
      const std::string rel = path.substr(0, slash);
      const std::string name = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      if (slash == std::string::npos) return last(rel, name);
      if (auto stop = enter(rel, name)) return *stop;
      if (auto nested = nested_repository(rel, path.substr(slash + 1), diag)) return *nested;
      start = slash + 1;
    }
  }

  // The path itself: a symlink is never a directory to the rules, whatever it points at (as in git, whose
  // "data/" line does not match a link named data).
  std::string last(const std::string& rel, const std::string& name) {
    struct stat st {};
    const bool exists = dir_.get() >= 0 && ::fstatat(dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    const auto decided = rules_.explain(rel, exists && S_ISDIR(st.st_mode));
    if (exists && S_ISDIR(st.st_mode) && (!decided || decided->negated) && options_.read_ignore_files &&
        is_repository_dir(join(abs_dir_, name))) {
      if (!submodules_.count(rel)) return fmt::format("not packed: {} is {}", rel, nested_repository_note);
      return fmt::format("{}; {} is a registered submodule: its files ship under its own repository's rules",
                         verdict(decided), rel);
    }
    return verdict(decided);
  }

  // Below a nested repository (just entered): not packed, or for a submodule its own verdict.
  std::optional<result<std::string>> nested_repository(const std::string& rel, const std::string& rest,
                                                      diagnostics& diag) {
    if (dir_.get() < 0 || !entered_included_ || !options_.read_ignore_files || !is_repository_dir(abs_dir_)) {
      return std::nullopt;
    }
    if (!submodules_.count(rel)) {
      return fmt::format("not packed: {} is below {}, {}", path_, rel, nested_repository_note);
    }
    auto inner = path_explainer(abs_dir_, options_).run(rest, diag);
    if (!inner) return inner;
    return fmt::format("{} (in the submodule {}, under its own repository's rules)", *inner, rel);
  }

  // A directory on the way, or the reason the path is not packed as such.
  std::optional<std::string> enter(const std::string& rel, const std::string& name) {
    struct stat st {};
    const bool exists = dir_.get() >= 0 && ::fstatat(dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    unique_fd next;
    bool through_link = false;
    entered_included_ = true;
    std::string abs = join(abs_dir_, name);
    if (exists && S_ISLNK(st.st_mode)) {
      const auto decided = rules_.explain(rel, false);
      if (decided && !decided->negated) return verdict(decided);
      const auto target = follows_to(name);
      if (!target) return fmt::format("not packed: {} is a symlink and is packed as one ({})", rel, verdict(decided));
      next = unique_fd(::open(target->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      abs = *target;
      followed_ = true;
      through_link = true;
    } else if (exists) {
      const auto decided = rules_.explain(rel, true);
      entered_included_ = !decided || decided->negated;
      next = unique_fd(::openat(dir_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    // A missing directory still gets the rules above it, as the walker would apply them were it there.
    push_ignore_files(rules_, next.get(), rel, options_.read_ignore_files, nullptr, through_link);
    dir_ = std::move(next);
    abs_dir_ = std::move(abs);
    return std::nullopt;
  }

  // Where the walker goes through the symlink `name`, or nullopt when it keeps it as a link (or cannot
  // resolve it, which it keeps too).
  std::optional<std::string> follows_to(const std::string& name) {
    std::string target(PATH_MAX, '\0');
    const auto n = ::readlinkat(dir_.get(), name.c_str(), target.data(), target.size());
    if (n < 0) return std::nullopt;
    target.resize(static_cast<std::size_t>(n));
    char real[PATH_MAX], root_real[PATH_MAX];
    if (!::realpath(join(abs_dir_, name).c_str(), real) || !::realpath(root_.c_str(), root_real)) return std::nullopt;
    if (kept_as_symlink(root_real, real, target, followed_)) return std::nullopt;
    return std::string(real);
  }

  const walk_options& options_;
  ignore_rules rules_;
  std::string root_;
  std::set<std::string> submodules_;
  std::string path_;  // the path explained
  unique_fd dir_;
  std::string abs_dir_;
  bool followed_ = false;          // below a followed link, where the walker follows every link
  bool entered_included_ = true;  // the directory entered last is not excluded (a repository there counts)
};

}  // namespace

result<std::string> explain_path(const fs::path& root, std::string_view relative_path, const walk_options& options,
                                 diagnostics& diag) {
  std::string path(relative_path);
  while (path.ends_with('/')) path.pop_back();
  if (path.empty()) {
    diag.set("--explain needs a path below the workspace");
    return error_code(errc::not_a_directory);
  }
  return path_explainer(root, options).run(path, diag);
}

}  // namespace ferry::packaging
