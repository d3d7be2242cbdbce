#pragma once
// Asking the configured interpreter, once, what its sys.path is: the async shell around discovery.hpp's
// probe_script() and parse_probe_output().
//
// The interpreter runs as the user would run it: in the working directory, with their environment
// (PYTHONPATH, VIRTUAL_ENV, ...), without -E, -I or -S. It runs in a process group of its own, which
// ferry owns: when the answer is late or the caller is cancelled, the whole group (a launcher script's
// children too) is killed with SIGKILL and the interpreter is reaped before run_probe returns, so that no
// zombie or orphan outlives it.
#include "config/xdg.hpp"
#include "packaging/discovery.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ferry::packaging {

// The environment variables that can change the interpreter's answer. The interpreter gets ferry's own
// environment except for these, which come from the caller's env_lookup (present or absent), so that an
// injected environment, the interpreter and discovery_cache's key always agree.
std::span<const std::string_view> python_environment();

// Where `python` is, found as a shell finds a command: a name with a '/' is taken as it is (relative to
// `working_dir`); otherwise the first executable regular file named so in $PATH (from `env`; an empty
// element means `working_dir`, no PATH means "/bin:/usr/bin" as in glibc). nullopt when there is none.
std::optional<std::filesystem::path> resolve_interpreter(const std::string& python,
                                                         const std::filesystem::path& working_dir,
                                                         const config::env_lookup& env);

struct probe_request {
  std::string python;                 // packaging.python: a name looked up on PATH, or a path
  std::filesystem::path working_dir;  // the project root; "" in sys.path stands for it
  std::chrono::nanoseconds timeout{std::chrono::seconds(30)};  // packaging.discover_timeout
  config::env_lookup env = config::process_env();
};

// Runs `python -c probe_script()` and parses its answer. Errors (with the story in `diag`):
//   python_failed     the interpreter is not found, cannot be started, exits non-zero or dies of a signal;
//   probe_timeout     it did not answer within the timeout;
//   bad_probe_output  it answered something else than the probe's JSON;
//   not_a_directory   the working directory is not a directory;
//   operation_aborted the caller was cancelled.
// Traced as ferry:packaging:probe with the interpreter as configured, and on success its
// sys.executable and version.
boost::asio::awaitable<result<probe_answer>> run_probe(tracing::action& parent, const probe_request& request,
                                                       diagnostics& diag);

// The same in the process environment.
boost::asio::awaitable<result<probe_answer>> run_probe(tracing::action& parent, const std::string& python,
                                                       const std::filesystem::path& working_dir,
                                                       std::chrono::nanoseconds timeout, diagnostics& diag);

}  // namespace ferry::packaging
