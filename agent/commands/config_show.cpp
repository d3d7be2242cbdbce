#include "agent/commands/command.hpp"

#include "tracing/action_types.hpp"

#include <fmt/format.h>

namespace ferry::agent {

void add_config_commands(CLI::App& app, selected_command& selected) {
  auto* config = app.add_subcommand("config", "inspect ferry's configuration");
  config->fallthrough();
  config->require_subcommand(1);
  auto* show = config->add_subcommand("show", "print the effective configuration and where each value came from");
  show->fallthrough();
  show->callback([&selected] {
    selected.action_type = action_types::cli::config_show;
    selected.run = [](command_context& ctx) -> boost::asio::awaitable<int> {
      fmt::print("{}", config::render(ctx.config));
      co_return 0;
    };
  });
}

}  // namespace ferry::agent
