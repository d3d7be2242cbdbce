#include "packaging/python_probe.hpp"

#include "config/units.hpp"
#include "net/child_process.hpp"
#include "packaging/error.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

extern char** environ;

namespace ferry::packaging {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

// PYTHONPLATLIBDIR and PYENV_DIR go beyond the obvious ones: the first renames lib/ in sys.path, the second
// moves where pyenv looks for .python-version.
constexpr std::array<std::string_view, 13> variables = {
    "PATH",          "PYTHONPATH",   "PYTHONHOME",    "PYTHONUSERBASE", "PYTHONNOUSERSITE",
    "PYTHONSAFEPATH", "PYTHONPLATLIBDIR", "VIRTUAL_ENV", "CONDA_PREFIX",  "PYENV_VERSION",
    "PYENV_ROOT",    "PYENV_DIR",    "HOME"};

constexpr std::size_t stdout_limit = 16 << 20;  // an answer is a few KiB; beyond this it is garbage anyway
constexpr std::size_t stderr_keep = 64 << 10;   // the end of a traceback is the part that explains it
constexpr std::size_t stderr_lines = 12;        // of which the error message quotes this many lines

bool is_executable_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

std::vector<std::string> child_environment(const config::env_lookup& env) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string_view::npos) vars[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  for (const auto name : variables) {
    vars.erase(std::string(name));
    if (auto v = env(name)) vars[std::string(name)] = std::move(*v);
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

std::string tail_lines(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.remove_suffix(1);
  std::size_t start = text.size();
  for (std::size_t lines = 0; start > 0 && lines < stderr_lines; --start)
    if (text[start - 1] == '\n') ++lines;
  if (start > 0) ++start;  // stopped on a newline: leave it out
  return std::string(text.substr(start));
}

error_code exit_failure(const probe_request& req, const net::child_result& got, diagnostics& diag) {
  const auto how = got.signal ? fmt::format("was killed by signal {}", got.signal)
                              : fmt::format("exited with status {}", got.exit_code);
  const auto err = tail_lines(got.err);
  diag.set(fmt::format("python interpreter '{}' {} in {}{}{}", req.python, how, req.working_dir.string(),
                       err.empty() ? "" : ":\n", err));
  return make_error_code(errc::python_failed);
}

std::string timeout_text(std::chrono::nanoseconds t) {
  return config::format_duration(std::chrono::duration_cast<config::duration>(t));
}

// ---- the probe ---------------------------------------------------------------------------------------------

error_code not_found(const probe_request& req, diagnostics& diag) {
  if (req.python.find('/') != std::string::npos)
    diag.set(fmt::format("python interpreter '{}' does not exist or is not executable; set packaging.python to "
                         "the interpreter ferry should ask about sys.path",
                         req.python));
  else
    diag.set(fmt::format("python interpreter '{}' was not found on PATH; set packaging.python to the interpreter "
                         "ferry should ask about sys.path (a name on PATH or a path)",
                         req.python));
  return make_error_code(errc::python_failed);
}

asio::awaitable<result<probe_answer>> probe(const probe_request& req, diagnostics& diag) {
  error_code ec;
  if (!fs::is_directory(req.working_dir, ec)) {
    diag.set(fmt::format("cannot ask python about sys.path in {}: not a directory", req.working_dir.string()));
    co_return make_error_code(errc::not_a_directory);
  }
  const auto exe = resolve_interpreter(req.python, req.working_dir, req.env);
  if (!exe) co_return not_found(req, diag);

  const net::child_request request{.argv = {req.python, "-c", std::string(probe_script())},
                                   .executable = *exe,
                                   .environment = child_environment(req.env),
                                   .working_dir = req.working_dir,
                                   .timeout = std::chrono::ceil<config::duration>(req.timeout),
                                   .out_limit = {.bytes = stdout_limit},
                                   .err_limit = {.bytes = stderr_keep, .keep_tail = true}};
  diagnostics ran_diag;
  auto got = co_await net::run_child(request, ran_diag);
  if (!got && got.error() == asio::error::timed_out) {
    diag.set(fmt::format("python interpreter '{}' did not answer within {} (packaging.discover_timeout)",
                         req.python, timeout_text(req.timeout)));
    co_return make_error_code(errc::probe_timeout);
  }
  if (!got && got.error() == asio::error::operation_aborted) co_return got.error();
  if (!got) {
    diag.set(fmt::format("python interpreter: {}", ran_diag.message));
    co_return make_error_code(errc::python_failed);
  }
  if (got->exit_code != 0) co_return exit_failure(req, *got, diag);
  co_return parse_probe_output(got->out, diag);
}

}  // namespace

std::span<const std::string_view> python_environment() { return variables; }

std::optional<fs::path> resolve_interpreter(const std::string& python, const fs::path& working_dir,
                                            const config::env_lookup& env) {
  if (python.empty()) return std::nullopt;
  error_code ec;
  const auto base = fs::absolute(working_dir, ec);
  if (ec) return std::nullopt;
  if (python.find('/') != std::string::npos) {
    auto p = (base / python).lexically_normal();
    return is_executable_file(p) ? std::optional(p) : std::nullopt;
  }
  const auto search = env("PATH").value_or("/bin:/usr/bin");
  std::string_view rest = search;
  for (;;) {
    const auto colon = rest.find(':');
    const auto dir = rest.substr(0, colon);
    auto candidate = (base / fs::path(dir.empty() ? "." : dir) / python).lexically_normal();
    if (is_executable_file(candidate)) return candidate;
    if (colon == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(colon + 1);
  }
}

asio::awaitable<result<probe_answer>> run_probe(tracing::action& parent, const probe_request& request,
                                                diagnostics& diag) {
  auto act = parent.child(action_types::packaging::probe, {{"python", request.python}});
  auto answer = co_await probe(request, diag);
  if (answer)
    act.succeed({{"executable", answer->executable}, {"version", answer->version}});
  else
    act.fail(answer.error(), diag);
  co_return answer;
}

asio::awaitable<result<probe_answer>> run_probe(tracing::action& parent, const std::string& python,
                                                const fs::path& working_dir, std::chrono::nanoseconds timeout,
                                                diagnostics& diag) {
  const probe_request request{python, working_dir, timeout};
  co_return co_await run_probe(parent, request, diag);
}

}  // namespace ferry::packaging
