#pragma once
// The node's interpreter against the one the environment was packed with, before the first task of a
// command that runs Python: a different implementation, major.minor version, platform or machine, or a
// glibc older than a shipped wheel needs, is refused with both sides named (and what needs them); a
// different patch level is a warning. The facts come from one short exec of the command's own interpreter
// on the node (`PYTHON -S -c SCRIPT`); comparing them is sans-io.
#include "packaging/manifest.hpp"
#include "net/node_link.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent {

struct node_python {
  std::string implementation;  // "cpython"
  std::string version;         // "3.11.2"
  std::string machine;         // "x86_64"
  std::string platform;        // "cp311-linux_x86_64", as python_info::platform
  std::string glibc;           // "2.36"; empty: not glibc (musl, say)
};

struct python_verdict {
  enum class kind { fits, warn, refuse };
  kind what = kind::fits;
  std::string text;  // for warn and refuse: one paragraph naming both sides
};

// The program the node runs for the check: prints one line, "FERRY-PYTHON IMPL VERSION MACHINE PLATFORM GLIBC".
std::string_view node_python_script();
// That line among what the program printed; false (and `why`) when there is none or it is malformed.
bool parse_node_python(std::string_view out, node_python& got, std::string& why);

// `compiled`: the shipped distributions that hold compiled extension modules (they need the same minor
// version); `where`: the node and the interpreter, for the text ("node-1's python3").
python_verdict compare_python(const packaging::python_info& local, const node_python& node, std::string_view where,
                              const std::vector<std::string>& compiled);

// Runs the check's program with `python` (as the command names it) on the node, in `workdir` (where the
// command runs: a relative interpreter path means the same there); empty: the login's directory.
boost::asio::awaitable<result<node_python>> ask_node_python(tracing::action& parent, net::node_link& link,
                                                            const std::string& python, const std::string& workdir,
                                                            diagnostics& diag);

}  // namespace ferry::agent
