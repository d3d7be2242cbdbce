#include "net/node_link.hpp"

namespace ferry::net {

boost::asio::awaitable<result<command_output>> run_command(tracing::action& parent, node_link& link,
                                                           std::string command, diagnostics& diag,
                                                           std::string_view input, std::size_t max_output) {
  collect_sink sink(max_output);
  buffer_source source(input);
  exec_request request{std::move(command), input.empty() ? nullptr : &source, &sink};
  auto r = co_await link.exec(parent, request, diag);
  if (!r) co_return r.error();
  co_return command_output{*r, std::move(sink.out), std::move(sink.err)};
}

}  // namespace ferry::net
