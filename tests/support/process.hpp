#pragma once
// Running real programs from tests: ferry itself, python3 with eliot, git, the aws CLI.
#include <filesystem>
#include <map>
#include <memory>
#include <sys/types.h>
#include <optional>
#include <string>
#include <vector>

namespace ferry::test {

struct process_result {
  int exit_code = -1;  // 128 + N when killed by signal N
  std::string out;
  std::string err;
};

struct process_options {
  std::map<std::string, std::string> env;    // added to (or replacing in) the current environment
  std::vector<std::string> unset_env;        // removed from it
  std::optional<std::filesystem::path> cwd;
  std::string input;                          // written to stdin (up to 64 KiB), then closed
};

// Runs argv[0] (looked up on PATH) to completion, capturing both streams.
process_result run(const std::vector<std::string>& argv, const process_options& options = {});

// A child running in the background: signal it, then wait for its result.
class child {
 public:
  child(pid_t pid, int out_fd, int err_fd) : pid_(pid), out_(out_fd), err_(err_fd) {}
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  ~child();
  pid_t pid() const { return pid_; }
  void signal(int sig) const;
  // Drains its output and reaps it.
  process_result wait();

 private:
  pid_t pid_;
  int out_, err_;
  bool reaped_ = false;
};

std::unique_ptr<child> spawn(const std::vector<std::string>& argv, const process_options& options = {});
std::unique_ptr<child> spawn_ferry(const std::vector<std::string>& args, const process_options& options = {});

// Runs the ferry binary under test.
process_result run_ferry(const std::vector<std::string>& args, const process_options& options = {});

// Points ferry's config, state and cache (XDG_CONFIG_HOME, XDG_STATE_HOME, XDG_CACHE_HOME) at `home`'s
// config, state and cache, and HOME at `home`: nothing of this machine's own reaches ferry.
void use_home(process_options& options, const std::filesystem::path& home);

// The pid a test's script wrote to `file` (0 when there is none).
pid_t read_pid(const std::filesystem::path& file);

// Dead: no such process, or a zombie (then dead, and its parent's to reap: PID 1 here reaps no orphans).
bool dead_or_zombie(pid_t pid);

// For posix_spawn and exec: each string's data, then a null. The strings must outlive the result.
std::vector<char*> c_pointers(std::vector<std::string>& strings);

// The last `size` bytes of a log, after "..." when it was cut: for an exception's message.
std::string last_bytes(const std::string& text, std::size_t size);

// The python3 that ships Debian's python3-eliot.
inline const char* system_python = "/usr/bin/python3";

}  // namespace ferry::test
