#include "support/process.hpp"

#include <cerrno>
#include <fstream>
#include <fcntl.h>
#include <cstring>
#include <csignal>
#include <poll.h>
#include <spawn.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace ferry::test {
namespace {

std::vector<std::string> build_env(const process_options& options) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& name : options.unset_env) env.erase(name);
  for (const auto& [k, v] : options.env) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// Drains stdout and stderr together, so that no pipe fills up and blocks the child.
void pump(int out_fd, int err_fd, process_result& result) {
  char buf[65536];
  while (out_fd >= 0 || err_fd >= 0) {
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("poll failed");
    }
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const auto n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? result.out : result.err).append(buf, static_cast<std::size_t>(n));
      } else {
        ::close(fds[i].fd);
        (i == 0 ? out_fd : err_fd) = -1;
      }
    }
  }
}

}  // namespace

std::unique_ptr<child> spawn(const std::vector<std::string>& argv, const process_options& options) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC))
    throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  if (options.cwd) posix_spawn_file_actions_addchdir_np(&actions, options.cwd->c_str());
  auto args = argv;
  auto env = build_env(options);
  auto argp = c_pointers(args);
  auto envp = c_pointers(env);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv.at(0).c_str(), &actions, nullptr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    for (int fd : {in[1], out[0], err[0]}) ::close(fd);
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  if (!options.input.empty()) {
    // Small inputs only (up to a pipe's buffer): written before the child's output is drained.
    if (::write(in[1], options.input.data(), options.input.size()) < 0) throw std::runtime_error("write failed");
  }
  ::close(in[1]);
  return std::make_unique<child>(pid, out[0], err[0]);
}

child::~child() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    wait();
  }
}

void child::signal(int sig) const { ::kill(pid_, sig); }

process_result child::wait() {
  process_result result;
  pump(out_, err_, result);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

process_result run(const std::vector<std::string>& argv, const process_options& options) {
  std::unique_ptr<child> c;
  try {
    c = spawn(argv, options);
  } catch (const std::runtime_error& e) {
    process_result failed;
    failed.err = e.what();
    return failed;
  }
  return c->wait();
}

std::unique_ptr<child> spawn_ferry(const std::vector<std::string>& args, const process_options& options) {
  std::vector<std::string> argv{FERRY_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return spawn(argv, options);
}

process_result run_ferry(const std::vector<std::string>& args, const process_options& options) {
  std::vector<std::string> argv{FERRY_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, options);
}

void use_home(process_options& options, const std::filesystem::path& home) {
  options.env["XDG_CONFIG_HOME"] = (home / "config").string();
  options.env["XDG_STATE_HOME"] = (home / "state").string();
  options.env["XDG_CACHE_HOME"] = (home / "cache").string();
  options.env["HOME"] = home.string();
}

pid_t read_pid(const std::filesystem::path& file) {
  std::ifstream in(file);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

bool dead_or_zombie(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

std::vector<char*> c_pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string last_bytes(const std::string& text, std::size_t size) {
  return text.size() <= size ? text : "..." + text.substr(text.size() - size);
}

}  // namespace ferry::test
