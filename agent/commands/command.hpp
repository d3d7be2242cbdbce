#pragma once
// A command is a coroutine over a command_context that returns the process exit code. Each command
// file registers its CLI11 subcommands and, when chosen, fills in `selected_command`.
#include "agent/cli/command_context.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/awaitable.hpp>

#include <functional>
#include <string_view>
#include <vector>

namespace ferry::agent {

struct selected_command {
  // The trace's root action, one of tracing/action_types.hpp's names (a constant: nothing owns it here).
  std::string_view action_type;
  std::function<boost::asio::awaitable<int>(command_context&)> run;
  std::vector<config::flag_value> config_flags;  // flags that set configuration keys
  bool takes_command = false;  // accepts a command after `--` (global_options::command)
};

void add_version_command(CLI::App& app, selected_command& selected);
void add_config_commands(CLI::App& app, selected_command& selected);
void add_trace_commands(CLI::App& app, selected_command& selected);
void add_storage_commands(CLI::App& app, selected_command& selected);
void add_pool_commands(CLI::App& app, selected_command& selected);
void add_pack_command(CLI::App& app, selected_command& selected);
void add_nodes_commands(CLI::App& app, selected_command& selected);
void add_exec_command(CLI::App& app, selected_command& selected);
void add_run_command(CLI::App& app, selected_command& selected);
void add_map_command(CLI::App& app, selected_command& selected);
void add_warmup_command(CLI::App& app, selected_command& selected);
void add_cluster_commands(CLI::App& app, selected_command& selected);
void add_doctor_command(CLI::App& app, selected_command& selected);
void add_api_command(CLI::App& app, selected_command& selected);

}  // namespace ferry::agent
