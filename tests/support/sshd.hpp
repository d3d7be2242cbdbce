#pragma once
// A real OpenSSH server per test (Debian's /usr/sbin/sshd -D -e): the peer of ferry's SSH layer.
//
// It listens on 127.0.0.1 and a free port with an ed25519 host key of its own (ssh-keygen), takes the
// keys given to authorize() (its AuthorizedKeysFile is in the fixture's directory), offers only
// curve25519-sha256, lets root log in (tests run as root), runs without PAM, without StrictModes (the
// fixture's files live in /tmp) and with MaxSessions 256 unless told otherwise (OpenSSH allows 10
// channels per connection by default; ferry runs many commands side by side on one connection).
//
// The login's HOME is an empty directory of the fixture (SetEnv HOME=...): Debian's bash reads
// ~/.bashrc even for commands run by sshd, and root's here runs `pyenv init` (about 150 ms per command).
//
// sshd runs as the first process of pid and mount namespaces of its own (`unshare --pid --fork
// --mount-proc`), for two reasons. sshd puts every connection into a session of its own, so the
// connections and the commands they run are not in sshd's process group; but all of them are in its
// pid namespace, which the kernel empties when its first process dies: kill_all() (and the destructor)
// SIGKILL the process group of unshare and sshd, and every process of the server goes with them. And
// the namespace's own /proc gives the commands the ids they see themselves under ($$ and /proc/$$ agree).
// unshare runs under `setpriv --pdeathsig KILL`, so a test process that crashes takes its server along.
#include "support/temp_dir.hpp"

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ferry::test {

class sshd_server {
 public:
  explicit sshd_server(int max_sessions = 256);
  ~sshd_server();
  sshd_server(const sshd_server&) = delete;
  sshd_server& operator=(const sshd_server&) = delete;

  std::string host() const { return "127.0.0.1"; }
  std::uint16_t port() const { return port_; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  std::filesystem::path home() const { return dir_ / "home"; }  // the login's HOME

  // Appends an authorized_keys line ("ssh-ed25519 AAAA... comment").
  void authorize(const std::string& public_key_line) const;
  // The host key's fingerprint, "SHA256:...", as ssh-keygen -l prints it.
  std::string host_key_fingerprint() const;

  // Stops the server (every process of it) and starts it again on the same port; with `new_host_key`,
  // with a host key made afresh, as a rebuilt node would have.
  void restart(bool new_host_key);
  // SIGKILL to every process of the server: the listener, each connection, the commands they run.
  void kill_all();
  // SIGSTOP / SIGCONT to every process of the server: a peer that is gone without closing anything.
  void freeze() const;
  void thaw() const;
  // Every process of the server's namespace, as host pids.
  std::vector<pid_t> processes() const;
  bool running() const { return leader_ > 0; }

  // sshd's log (-e: it logs to stderr), for failure messages.
  std::string log() const;

 private:
  void make_host_key() const;
  void write_config() const;
  bool start();  // false when another process took the port first
  pid_t namespace_init() const;
  void signal_all(int sig) const;

  temp_dir dir_;
  int max_sessions_;
  std::uint16_t port_ = 0;
  pid_t leader_ = -1;  // unshare, leading the process group it shares with sshd
  std::string pid_namespace_;  // readlink of /proc/PID/ns/pid of the server's processes
};

}  // namespace ferry::test
