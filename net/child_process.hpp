#pragma once
// Running a local program to its end: a helper such as `ip`, `ssh-keygen` or OpenSSH's `ssh`, a launcher
// shell for a detached process, or the Python interpreter that packaging asks about sys.path. The child
// runs in a process group of its own (a launcher script's children with it) with stdin from /dev/null;
// both output streams are collected (or, for a user's program, ferry's own are inherited); its exit is awaited through a pidfd (no SIGCHLD handler, nothing
// process-wide). At the deadline, or when the caller is cancelled, the whole group is killed with SIGKILL
// and reaped before the call returns: nothing is left behind, not even a zombie. So is what the child left
// in its group when it exits, unless the caller asks to keep it (see leftovers).
#include "config/units.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ferry::net {

// What becomes of the rest of the child's process group once the child has exited by itself. A launcher
// that starts something detached must use `keep`: its background child is still in the group for the
// moment between the launcher's exit and the child's own setsid().
enum class leftovers { kill, keep };

// How much of one output stream is kept. The stream is read to its end whatever its size, so that the
// child never blocks on a full pipe; past `bytes` the first ones are kept, or with keep_tail the last ones
// (the end of a traceback is the part that explains it).
struct output_limit {
  std::size_t bytes = 1 << 20;  // helpers print a few lines; the cap keeps garbage from being a memory problem
  bool keep_tail = false;
};

struct child_request {
  std::vector<std::string> argv;                        // argv[0] is looked up on ferry's PATH, unless...
  std::optional<std::filesystem::path> executable;      // ...this is given: then it runs as it is
  std::optional<std::vector<std::string>> environment;  // "NAME=value" each; none: ferry's own environment
  std::optional<std::filesystem::path> working_dir;     // none: ferry's own
  config::duration timeout{};                           // from the caller's config; zero: none (a user's program)
  leftovers after_exit = leftovers::kill;
  output_limit out_limit;
  output_limit err_limit;
  // A user's program run on the workstation (`ferry cluster run`): it gets ferry's own stdin, stdout and
  // stderr, and nothing is collected. Its own process group all the same: Ctrl-C reaches ferry, which
  // cancels, and the cancellation ends the group.
  bool inherit_stdio = false;
};

struct child_result {
  int exit_code = -1;  // the exit status, or 128 + N when killed by signal N
  int signal = 0;      // N when killed by signal N, else 0
  std::string out;
  std::string err;
};

// Runs the request's program to its end. Fails with the system's error when it cannot start (or when its
// output cannot be read), with asio::error::timed_out at the timeout, with operation_aborted when cancelled;
// diag names the program. A non-zero exit is not a failure here: callers read exit_code.
boost::asio::awaitable<result<child_result>> run_child(const child_request& request, diagnostics& diag);

// "cmd arg 'arg with space'", for diagnostics and logs: only the arguments that need it are quoted.
std::string command_line(const std::vector<std::string>& argv);

}  // namespace ferry::net
