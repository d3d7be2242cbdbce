#pragma once
// The line a node's sh runs for one task: in the workspace layer, with the layers on PYTHONPATH in
// sys.path order, FERRY_TASK_ID set to the task's serialised eliot id (a Python program that uses eliot
// continues the trace with it), the user's --env variables, and the command itself, exec'd so that its
// exit status and signals are its own. On a team pool's node it is exec'd through env.runner
// (`ferry-node as-tenant USER --`), which becomes the tenant's own Unix user first: everything before it
// (the cd, the variables, the --env values read from stdin) is done by the login user's sh, and the values
// reach only the command.
//
// The --env values never enter the line: it is traced (ssh:exec) and it is the argv of the node's shell,
// which any user of the node can read in /proc. They travel on the command's stdin instead, as quoted
// assignments up to a random end line, and the shell evals them before it execs the command.
#include "agent/materialise/materialise.hpp"

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

struct task_line {
  std::string command;  // for the node's sh; holds no --env value
  std::string input;    // the command's stdin: the --env assignments, empty when there are none
};

// Whether the command runs Python: its program (after `env`, `nice`, `time`, `exec` and NAME=VALUE words)
// is python, python3, python3.11, ... by its last path part. A lazy start needs Python's import hook.
bool runs_python(const std::vector<std::string>& argv);
// That program as the command names it ("python3", "/opt/venv/bin/python"); empty when it runs no Python.
std::string python_program(const std::vector<std::string>& argv);

// With env.lease (a pool's node), the line runs under the lease (node_lease.hpp's wrap_in_lease).
task_line task_command(const environment& env, std::string_view task_id, const env_vars& vars,
                       const std::vector<std::string>& argv);

}  // namespace ferry::agent
