#include "provision/command.hpp"

namespace ferry::provision {

boost::asio::awaitable<result<command_result>> run_command(const std::vector<std::string>& argv,
                                                           config::duration timeout, diagnostics& diag,
                                                           leftovers after_exit) {
  const net::child_request request{.argv = argv, .timeout = timeout, .after_exit = after_exit};
  co_return co_await net::run_child(request, diag);
}

std::string trimmed(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.remove_suffix(1);
  return std::string(text);
}

}  // namespace ferry::provision
