#pragma once
// The line a node's sh runs for one task: in the workspace layer, with the layers on PYTHONPATH in
// sys.path order, FERRY_TASK_ID set to the task's serialised eliot id (a Python program that uses eliot
// continues the trace with it), the user's --env variables, and the command itself, exec'd so that its
// exit status and signals are its own.
#include "agent/materialise.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::agent {

using env_vars = std::vector<std::pair<std::string, std::string>>;

// "K=V" -> {K, V}; false (and `why`) for a malformed one: no '=' or a name that is not a shell name.
bool parse_env_var(std::string_view text, std::pair<std::string, std::string>& out, std::string& why);
// Every --env of a command; false (and `why`, naming the first bad one) when one is malformed.
bool parse_env_vars(const std::vector<std::string>& texts, env_vars& out, std::string& why);

std::string task_command(const environment& env, std::string_view task_id, const env_vars& vars,
                         const std::vector<std::string>& argv);

}  // namespace ferry::agent
