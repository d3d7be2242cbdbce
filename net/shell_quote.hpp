#pragma once
// Command lines for a POSIX shell. A node link hands a command to the node's shell as one string (sshd
// to the login shell, as ssh does), and so does `sh -c` here, so an argv has to be quoted into that
// string such that the shell splits it back into the same bytes:
// each argument goes inside single quotes, where sh gives no character a meaning (no $, `, \, globs
// or newlines), and a single quote itself is closed, escaped and reopened as '\''.
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::net {

// One argument, quoted for sh: `it's` becomes `'it'\''s'`, the empty string `''`. A NUL byte cannot
// pass through exec(2); an argument holding one is a bug in the caller (std::invalid_argument).
std::string shell_quote(std::string_view arg);

// An argv as one sh command line: the quoted arguments joined by spaces.
std::string quote_argv(std::span<const std::string> argv);
std::string quote_argv(std::initializer_list<std::string_view> argv);

}  // namespace ferry::net
