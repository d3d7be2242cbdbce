#include "agent/node/tenant_account.hpp"

#include "agent/node/error.hpp"
#include "agent/node/make_dirs.hpp"
#include "packaging/unique_fd.hpp"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace ferry::agent::node {
namespace {

// On the node's own /run: every node of a machine that shares /etc/passwd (local nodes) shares it too.
constexpr const char* users_lock = "/run/ferry-tenant-users.lock";

error_code tenant_error(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::tenant_failed);
}

std::string read_whole_file(const char* path) {
  std::string out;
  packaging::unique_fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return out;
  char buffer[1 << 14];
  for (;;) {
    const auto n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

std::optional<passwd_entry> look_up_user(const std::string& name) { return find_passwd(read_whole_file("/etc/passwd"), name); }

result<passwd_entry> checked_user(const passwd_entry& e, diagnostics& diag) {
  if (!made_for_tenant(e))
    return tenant_error(diag, fmt::format("the node has a user {} (uid {}) that ferry did not make (its comment is not "
                                    "'{}'): no tenant runs as it",
                                    e.name, e.uid, tenant_user_comment));
  return e;
}

// useradd's path: the node's PATH may be narrowed, and root's sbin is where Debian, Ubuntu and Amazon
// Linux keep it.
const char* useradd_path() {
  for (const char* p : {"/usr/sbin/useradd", "/sbin/useradd", "/usr/bin/useradd"})
    if (::access(p, X_OK) == 0) return p;
  return nullptr;
}

// Runs useradd for `name`; its output (never this program's stdout, which is the trace) in `said`.
bool run_useradd(const char* program, const std::string& name, std::string& said) {
  const auto home = "/home/" + name;
  std::array<const char*, 12> argv{program,  "--create-home", "--home-dir", home.c_str(), "--comment",
                                   tenant_user_comment.data(), "--shell", "/bin/sh", "--user-group",
                                   name.c_str(), nullptr, nullptr};
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return false;
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    const char* env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", nullptr};
    ::execve(program, const_cast<char* const*>(argv.data()), const_cast<char* const*>(env));
    ::_exit(127);
  }
  ::close(out[1]);
  char buffer[4096];
  for (;;) {
    const auto n = ::read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (said.size() < 4096) said.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  while (!said.empty() && (said.back() == '\n' || said.back() == '\r')) said.pop_back();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

result<passwd_entry> make_user(const std::string& name, diagnostics& diag) {
  packaging::unique_fd lock(::open(users_lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (lock.get() < 0 || ::flock(lock.get(), LOCK_EX) != 0)
    return tenant_error(diag, fmt::format("cannot lock {}: {}", users_lock, std::strerror(errno)));
  // Another run may have made it while this one waited.
  if (auto found = look_up_user(name)) return checked_user(*found, diag);
  const char* program = useradd_path();
  if (!program)
    return tenant_error(diag, fmt::format("cannot make the tenant's user {}: the node has no useradd (/usr/sbin/useradd)",
                                    name));
  std::string said;
  if (!run_useradd(program, name, said))
    return tenant_error(diag, fmt::format("useradd {} failed{}{}", name, said.empty() ? "" : ": ", said));
  auto made = look_up_user(name);
  if (!made) return tenant_error(diag, fmt::format("useradd made no line for {} in /etc/passwd", name));
  return checked_user(*made, diag);
}

// The home is the tenant's alone, whatever HOME_MODE the node's login.defs says.
void close_tenant_home(const passwd_entry& user) {
  struct stat st {};
  if (::lstat(user.home.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == user.uid)
    ::chmod(user.home.c_str(), 0700);
}

void give_tree_below(int dir, const passwd_entry& user) {
  DIR* d = ::fdopendir(dir);
  if (!d) {
    ::close(dir);
    return;
  }
  std::vector<std::string> names;
  while (const auto* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  for (const auto& n : names) {
    ::fchownat(::dirfd(d), n.c_str(), user.uid, user.gid, AT_SYMLINK_NOFOLLOW);
    const int sub = ::openat(::dirfd(d), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) give_tree_below(sub, user);
  }
  ::closedir(d);
}

}  // namespace

result<passwd_entry> ensure_tenant_user(const std::string& name, diagnostics& diag) {
  if (::geteuid() != 0)
    return tenant_error(diag, fmt::format("the node program runs as uid {}, not root: a pool node must let ferry log in "
                                    "as root, which alone can run each tenant as a Unix user of its own",
                                    ::geteuid()));
  if (!tenant_user_ok(name))
    return tenant_error(diag, fmt::format("'{}' is not a tenant's user name (ferry- and up to 26 of a-z, 0-9, _ and -)", name));
  auto user = look_up_user(name);
  auto got = user ? checked_user(*user, diag) : make_user(name, diag);
  if (got) close_tenant_home(*got);
  return got;
}

result<std::string> tenant_dir(const std::string& shared, const passwd_entry& user, diagnostics& diag) {
  const auto tenants = shared + "/tenants";
  const auto dir = tenants + "/" + user.name;
  if (!make_dirs(dir, 0750))
    return tenant_error(diag, fmt::format("cannot create {}: {}", dir, std::strerror(errno)));
  // Made by root, so that the tenant never replaces what the node program writes below it.
  if (::chown(dir.c_str(), 0, user.gid) != 0 || ::chmod(dir.c_str(), 0750) != 0 || ::chmod(tenants.c_str(), 0755) != 0)
    return tenant_error(diag, fmt::format("cannot hand {} to {}: {}", dir, user.name, std::strerror(errno)));
  return dir;
}

result<void> give_tree(const std::string& path, const passwd_entry& user, diagnostics& diag) {
  if (::lchown(path.c_str(), user.uid, user.gid) != 0)
    return tenant_error(diag, fmt::format("cannot hand {} to {}: {}", path, user.name, std::strerror(errno)));
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) give_tree_below(fd, user);
  return {};
}

result<passwd_entry> become_tenant(const std::string& name, diagnostics& diag) {
  auto user = ensure_tenant_user(name, diag);
  if (!user) return user.error();
  const gid_t groups[] = {user->gid};
  if (::setgroups(1, groups) != 0 || ::setgid(user->gid) != 0 || ::setuid(user->uid) != 0)
    return tenant_error(diag, fmt::format("cannot become {}: {}", name, std::strerror(errno)));
  // A kernel that let it keep root: better no work than work as root.
  if (::setuid(0) == 0) return tenant_error(diag, fmt::format("{} could become root again", name));
  return user;
}

int exec_as_tenant(const std::string& name, char** argv) {
  diagnostics diag;
  auto user = become_tenant(name, diag);
  if (!user) {
    std::fprintf(stderr, "ferry-node as-tenant: %s\n", diag.message.c_str());
    return 1;
  }
  ::setenv("HOME", user->home.c_str(), 1);
  ::setenv("USER", user->name.c_str(), 1);
  ::setenv("LOGNAME", user->name.c_str(), 1);
  // The login user's places, which the tenant cannot reach: its programs would fail on them.
  for (const char* v : {"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "MAIL"})
    ::unsetenv(v);
  ::execvp(argv[0], argv);
  const int err = errno;
  std::fprintf(stderr, "ferry-node as-tenant: %s: %s\n", argv[0], std::strerror(err));
  return err == ENOENT ? 127 : 126;
}

}  // namespace ferry::agent::node
