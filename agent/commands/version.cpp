#include "agent/commands/command.hpp"

#include "tracing/action_types.hpp"

#include <boost/version.hpp>
#include <fmt/format.h>
#include <openssl/opensslv.h>

namespace ferry::agent {

void add_version_command(CLI::App& app, selected_command& selected) {
  auto* cmd = app.add_subcommand("version", "print ferry's version and the libraries it was built with");
  cmd->fallthrough();
  cmd->callback([&selected] {
    selected.action_type = action_types::cli::version;
    selected.run = [](command_context&) -> boost::asio::awaitable<int> {
      fmt::print("ferry {}\nboost {}.{}.{}, {}\n", FERRY_VERSION, BOOST_VERSION / 100000, BOOST_VERSION / 100 % 1000,
                 BOOST_VERSION % 100, OPENSSL_VERSION_TEXT);
      co_return 0;
    };
  });
}

}  // namespace ferry::agent
