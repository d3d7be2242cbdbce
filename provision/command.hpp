#pragma once
// Running a helper program to its end: `ip`, `ssh-keygen`, a launcher shell for a detached sshd, or
// OpenSSH's `ssh`, through net/child_process.hpp (which tells what is guaranteed: a process group of its
// own, stdin from /dev/null, nothing left behind at the deadline or on cancellation).
#include "config/units.hpp"
#include "net/child_process.hpp"
#include "net/shell_quote.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace ferry::provision {

using command_result = net::child_result;
using net::leftovers;

// Runs argv (argv[0] looked up on PATH) in ferry's environment and working directory. Fails with the
// system's error when it cannot start, with asio::error::timed_out at `timeout`, with operation_aborted
// when cancelled; diag names the program. A non-zero exit is not a failure here: callers read exit_code.
boost::asio::awaitable<result<command_result>> run_command(const std::vector<std::string>& argv,
                                                           config::duration timeout, diagnostics& diag,
                                                           leftovers after_exit = leftovers::kill);

// Output without its trailing newlines, carriage returns and blanks, for a one-line message.
std::string trimmed(std::string_view text);

// "cmd arg 'arg with space'", for diagnostics and logs.
using net::command_line;

// `text` as one word for /bin/sh, in single quotes.
using net::shell_quote;

}  // namespace ferry::provision
