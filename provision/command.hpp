#pragma once
// Running a helper program to its end: `ip`, `ssh-keygen`, a launcher shell for a detached sshd, or
// OpenSSH's `ssh`. The child runs in a process group of its own with stdin from /dev/null; both output
// streams are collected; its exit is awaited through a pidfd (no SIGCHLD handler, nothing process-wide).
// At the deadline, or when the caller is cancelled, the whole group is killed and reaped before the call
// returns: nothing is left behind, not even a zombie. So is what the child left in its group when it
// exits, unless the caller asks to keep it (see leftovers).
#include "config/units.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <vector>

namespace ferry::provision {

struct command_result {
  int exit_code = -1;  // the exit status, or 128 + N when killed by signal N
  std::string out;
  std::string err;
};

// What becomes of the rest of the child's process group once the child has exited by itself. A launcher
// that starts something detached must use `keep`: its background child is still in the group for the
// moment between the launcher's exit and the child's own setsid().
enum class leftovers { kill, keep };

// Runs argv (argv[0] looked up on PATH). Fails with the system's error when it cannot start, with
// asio::error::timed_out at `timeout`, with operation_aborted when cancelled; diag names the program.
// A non-zero exit is not a failure here: callers read exit_code.
boost::asio::awaitable<result<command_result>> run_command(const std::vector<std::string>& argv,
                                                           config::duration timeout, diagnostics& diag,
                                                           leftovers after_exit = leftovers::kill);

// "cmd arg 'arg with space'", for diagnostics and logs.
std::string command_line(const std::vector<std::string>& argv);

// `text` as one word for /bin/sh, in single quotes.
std::string shell_quote(std::string_view text);

}  // namespace ferry::provision
