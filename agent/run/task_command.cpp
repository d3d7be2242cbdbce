#include "agent/run/task_command.hpp"

#include "agent/provide/node_lease.hpp"

#include "net/shell_quote.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <random>

namespace ferry::agent {

namespace {

bool shell_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

// The line that ends the assignments: random, so that no value can end them early.
std::string end_line(const env_vars& vars) {
  for (;;) {
    std::random_device rd;
    const auto line = fmt::format("ferry-env-end-{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
    bool clash = false;
    for (const auto& kv : vars) clash = clash || kv.second.find(line) != std::string::npos;
    if (!clash) return line;
  }
}

}  // namespace

bool parse_env_var(std::string_view text, std::pair<std::string, std::string>& out, std::string& why) {
  const auto eq = text.find('=');
  const auto name = text.substr(0, eq);
  if (!shell_name(name)) {
    // The name alone: the value may be a secret.
    why = fmt::format("--env {}=...: {} is not a variable name (letters, digits and _, not starting with a digit)",
                      name, name);
    return false;
  }
  if (eq != std::string_view::npos) {
    out = {std::string(name), std::string(text.substr(eq + 1))};
    return true;
  }
  // `--env NAME`: this process's value, which then never appears in an argv at all.
  const char* value = std::getenv(std::string(name).c_str());
  if (!value) {
    why = fmt::format("--env {}: {} is not set here; give NAME=VALUE, or set it before running ferry", name, name);
    return false;
  }
  out = {std::string(name), value};
  return true;
}

bool parse_env_vars(const std::vector<std::string>& texts, env_vars& out, std::string& why) {
  for (const auto& text : texts) {
    std::pair<std::string, std::string> kv;
    if (!parse_env_var(text, kv, why)) return false;
    out.push_back(std::move(kv));
  }
  return true;
}

std::string python_program(const std::vector<std::string>& argv) {
  for (const auto& word : argv) {
    const auto name = std::string_view(word).substr(word.rfind('/') == std::string::npos ? 0 : word.rfind('/') + 1);
    if (name == "env" || name == "nice" || name == "time" || name == "exec" || word.find('=') != std::string::npos ||
        (!word.empty() && word[0] == '-'))
      continue;
    if (name.substr(0, 6) != "python") return {};
    const auto version = name.substr(6);
    return version.find_first_not_of("0123456789.") == std::string_view::npos ? word : std::string();
  }
  return {};
}

bool runs_python(const std::vector<std::string>& argv) { return !python_program(argv).empty(); }

task_line task_command(const environment& env, std::string_view task_id, const env_vars& vars,
                       const std::vector<std::string>& argv) {
  // With a site file, the hook alone goes on PYTHONPATH: it makes sys.path the local one (stdlib where it
  // stood, each directory replaced by its layers). Without one, the layers go there themselves.
  std::string python_path = env.site_file.empty() ? std::string() : env.hook_dir;
  for (const auto& p : env.site_file.empty() ? env.python_path : std::vector<std::string>{}) {
    if (!python_path.empty()) python_path.push_back(':');
    python_path += p;
  }
  task_line out;
  out.command = fmt::format("cd {} && PYTHONPATH={} && FERRY_TASK_ID={} && export PYTHONPATH FERRY_TASK_ID && ",
                            net::shell_quote(env.workdir), net::shell_quote(python_path), net::shell_quote(task_id));
  if (!env.site_file.empty()) {
    // The path map lies beside the site file (agent/node/site_file.hpp): tracebacks name workstation files.
    const auto path_map = env.site_file.substr(0, env.site_file.rfind('/') + 1) + "paths.json";
    out.command += fmt::format("FERRY_SITE={} && FERRY_PATH_MAP={} && export FERRY_SITE FERRY_PATH_MAP && ",
                               net::shell_quote(env.site_file), net::shell_quote(path_map));
  }
  // A lazy start: the import hook on PYTHONPATH asks the node program here which layers have landed.
  if (!env.import_socket.empty())
    out.command += fmt::format("FERRY_IMPORT_SOCKET={} && export FERRY_IMPORT_SOCKET && ",
                               net::shell_quote(env.import_socket));
  if (!vars.empty()) {
    // The user's come after ferry's, so they win. `read` is a builtin: the values reach no argv.
    const auto end = end_line(vars);
    for (const auto& [k, v] : vars) out.input += fmt::format("export {}={}\n", k, net::shell_quote(v));
    out.input += end + "\n";
    out.command += fmt::format(
        "ferry_env= && while IFS= read -r ferry_line && [ \"$ferry_line\" != {0} ]; do ferry_env=\"$ferry_env$ferry_line\n"
        "\"; done && [ \"$ferry_line\" = {0} ] && eval \"$ferry_env\" && unset ferry_env ferry_line && ",
        end);
  }
  out.command += "exec ";
  // A pool tenant's command: the node program becomes its user, then execs it (the same process).
  if (!env.runner.empty()) out.command += env.runner + " ";
  out.command += net::quote_argv(argv);
  // On a pool's node, the whole line runs under the job's lease there.
  if (env.lease) wrap_in_lease(out, *env.lease->program, env.lease->cache_dir, env.lease->lease_id, env.lease->grace);
  return out;
}

}  // namespace ferry::agent
