#include "support/sshd.hpp"

#include "support/moto.hpp"  // pick_free_port
#include "support/process.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace ferry::test {
namespace {

using namespace std::chrono_literals;

constexpr int sshd_start_attempts = 5;
constexpr auto sshd_start_deadline = 20s;  // sshd starts in milliseconds; this only ends a hang

bool accepts_connections(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::string read_link(const std::string& path) {
  char buf[256];
  const auto n = ::readlink(path.c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// State and parent pid from /proc/PID/stat (after the name, which may hold blanks, in parentheses).
struct proc_stat {
  char state = 0;
  pid_t parent = -1;
};

proc_stat stat_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  proc_stat out;
  if (close == std::string::npos) return out;
  int ppid = -1;
  if (std::sscanf(stat.c_str() + close + 1, " %c %d", &out.state, &ppid) == 2) out.parent = ppid;
  return out;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

}  // namespace

sshd_server::sshd_server(int max_sessions) : max_sessions_(max_sessions) {
  std::filesystem::create_directories("/run/sshd");  // sshd's privilege separation directory
  std::filesystem::create_directories(home());
  dir_.write("authorized_keys", "");
  make_host_key();
  for (int attempt = 0; attempt < sshd_start_attempts; ++attempt) {
    port_ = pick_free_port();
    if (start()) return;
  }
  throw std::runtime_error("sshd: every free port was taken before sshd could bind it");
}

sshd_server::~sshd_server() { kill_all(); }

void sshd_server::make_host_key() const {
  const auto key = dir_ / "host_ed25519";
  std::filesystem::remove(key);
  std::filesystem::remove(dir_ / "host_ed25519.pub");
  const auto r = run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ferry-test-host", "-f", key.string()});
  if (r.exit_code != 0) throw std::runtime_error("ssh-keygen failed: " + r.err);
}

std::string sshd_server::host_key_fingerprint() const {
  const auto r = run({"ssh-keygen", "-l", "-E", "sha256", "-f", (dir_ / "host_ed25519.pub").string()});
  const auto start = r.out.find("SHA256:");
  if (start == std::string::npos) throw std::runtime_error("ssh-keygen -l failed: " + r.err);
  return r.out.substr(start, r.out.find(' ', start) - start);
}

void sshd_server::authorize(const std::string& public_key_line) const {
  std::ofstream out(dir_ / "authorized_keys", std::ios::app);
  out << public_key_line << "\n";
}

void sshd_server::write_config() const {
  dir_.write("sshd_config", fmt::format(R"(ListenAddress 127.0.0.1
Port {port}
HostKey {dir}/host_ed25519
AuthorizedKeysFile {dir}/authorized_keys
KexAlgorithms curve25519-sha256
PermitRootLogin yes
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
MaxSessions {max_sessions}
MaxStartups 100:30:200
PidFile none
SetEnv HOME={dir}/home
)",
                                        fmt::arg("port", port_), fmt::arg("dir", dir_.path().string()),
                                        fmt::arg("max_sessions", max_sessions_)));
}

bool sshd_server::start() {
  write_config();
  const auto log_path = dir_ / "sshd.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&defaults, sig);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  // setpriv: should the test process die without its destructors (a crash, an abort), the kernel kills
  // unshare, and unshare (--kill-child) the namespace, instead of leaving a server behind.
  std::vector<std::string> args{"setpriv",      "--pdeathsig", "KILL", "unshare", "--pid", "--fork", "--kill-child",
                                "--mount-proc", "/usr/sbin/sshd", "-D", "-e", "-f", (dir_ / "sshd_config").string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto before = log().size();
  const int rc = ::posix_spawnp(&leader_, "setpriv", &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error(std::string("cannot start setpriv/unshare: ") + std::strerror(rc));

  const auto deadline = std::chrono::steady_clock::now() + sshd_start_deadline;
  const auto listening = fmt::format("Server listening on 127.0.0.1 port {}", port_);
  for (;;) {
    int status = 0;
    if (::waitpid(leader_, &status, WNOHANG) == leader_) {
      leader_ = -1;
      const auto text = log().substr(before);
      if (text.find("Address already in use") != std::string::npos) return false;
      throw std::runtime_error("sshd exited before serving:\n" + last_bytes(text, 3000));
    }
    if (log().find(listening, before) != std::string::npos && accepts_connections(port_)) break;
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("sshd did not start:\n" + last_bytes(log(), 3000));
    std::this_thread::sleep_for(10ms);
  }
  const pid_t init = namespace_init();
  pid_namespace_ = read_link("/proc/" + std::to_string(init) + "/ns/pid");
  return true;
}

// sshd, pid 1 of the namespace: unshare's only child.
pid_t sshd_server::namespace_init() const {
  for (const pid_t pid : all_pids())
    if (stat_of(pid).parent == leader_) return pid;
  throw std::runtime_error("sshd: cannot find the server under unshare");
}

std::vector<pid_t> sshd_server::processes() const {
  std::vector<pid_t> out;
  if (pid_namespace_.empty()) return out;
  for (const pid_t pid : all_pids())
    if (read_link("/proc/" + std::to_string(pid) + "/ns/pid") == pid_namespace_) out.push_back(pid);
  return out;
}

void sshd_server::signal_all(int sig) const {
  for (const pid_t pid : processes()) ::kill(pid, sig);
}

void sshd_server::freeze() const { signal_all(SIGSTOP); }

void sshd_server::thaw() const { signal_all(SIGCONT); }

// SIGKILL before reaping: until unshare is reaped its process group id cannot be reused, so the signal
// reaches only the server's own processes. The namespace's other processes die with its first one.
void sshd_server::kill_all() {
  if (leader_ <= 0) return;
  thaw();  // a stopped process would still die, but its namespace would linger until it is scheduled
  ::kill(-leader_, SIGKILL);
  int status = 0;
  while (::waitpid(leader_, &status, 0) < 0 && errno == EINTR) {
  }
  leader_ = -1;
  // The kernel tears the namespace down asynchronously; wait until nothing of it runs. Zombies may stay a
  // while: sshd, orphaned, waits for this machine's pid 1 to reap it; they hold no port and no file.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  const auto running = [this] {
    for (const pid_t pid : processes())
      if (const auto st = stat_of(pid); st.state != 0 && st.state != 'Z' && st.state != 'X') return true;
    return false;
  };
  while (running() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  pid_namespace_.clear();
}

void sshd_server::restart(bool new_host_key) {
  kill_all();
  if (new_host_key) make_host_key();
  if (!start()) throw std::runtime_error(fmt::format("sshd: port {} was taken while it restarted", port_));
}

std::string sshd_server::log() const { return read_file(dir_ / "sshd.log"); }

}  // namespace ferry::test
