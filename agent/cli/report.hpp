#pragma once
// How a command says what went wrong, in one place: the prefix of the error line is written in report.cpp
// and nowhere else. A command that ends on an expected failure calls report(): its root action fails with
// the error, the human text goes to stderr, and the exit code says what happened: interrupted when the
// error is the cancellation of Ctrl-C (the CLI says `interrupted` itself, once, whatever the command was
// doing), usage when the configuration lacks what the command needs (storage.url) or holds a value it
// cannot use (a malformed storage.url), else `code`. A message that is no error_code (a usage mistake, one
// of several failures) goes out through print_error().
#include "agent/error.hpp"
#include "agent/cli/exit_code.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <string>
#include <string_view>

namespace ferry::agent {

// The error line for `message`, without its newline: what print_error() writes, and what tests look for.
std::string error_line(std::string_view message);
// One line on stderr: error_line(message).
void print_error(std::string_view message);

int report(tracing::action& act, const error_code& ec, const diagnostics& diag, int code = exit_code::failure);

}  // namespace ferry::agent
