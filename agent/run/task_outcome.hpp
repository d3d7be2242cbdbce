#pragma once
// How a remote command's end becomes ferry's exit code, the way a shell would report it.
#include "net/exit_info.hpp"

#include <string_view>

namespace ferry::agent {

// SIGTERM for "TERM"; 0 for a name this machine does not know.
int signal_number(std::string_view name);

// The status when the command exited, 128 + N when signal N ended it, 1 otherwise.
int exit_code_of(const net::exit_info& e);

// Seconds since the epoch, as eliot writes timestamps (for `submitted_at`).
double unix_now();

}  // namespace ferry::agent
