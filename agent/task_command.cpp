#include "agent/task_command.hpp"

#include "net/ssh_quote.hpp"

#include <fmt/format.h>

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

}  // namespace

bool parse_env_var(std::string_view text, std::pair<std::string, std::string>& out, std::string& why) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos) {
    why = fmt::format("--env {}: give NAME=VALUE", text);
    return false;
  }
  const auto name = text.substr(0, eq);
  if (!shell_name(name)) {
    why = fmt::format("--env {}: {} is not a variable name (letters, digits and _, not starting with a digit)", text,
                      name);
    return false;
  }
  out = {std::string(name), std::string(text.substr(eq + 1))};
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

std::string task_command(const environment& env, std::string_view task_id, const env_vars& vars,
                         const std::vector<std::string>& argv) {
  std::string python_path;
  for (const auto& p : env.python_path) {
    if (!python_path.empty()) python_path.push_back(':');
    python_path += p;
  }
  // Assignments before `exec` are exported to the command alone; the user's come last, so they win.
  std::string line = fmt::format("cd {} && PYTHONPATH={} FERRY_TASK_ID={}", net::shell_quote(env.workdir),
                                 net::shell_quote(python_path), net::shell_quote(task_id));
  for (const auto& [k, v] : vars) line += fmt::format(" {}={}", k, net::shell_quote(v));
  line += " exec ";
  line += net::quote_argv(argv);
  return line;
}

}  // namespace ferry::agent
