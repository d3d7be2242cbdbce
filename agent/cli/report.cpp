#include "agent/cli/report.hpp"

#include "config/error.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>

#include <cstdio>

namespace ferry::agent {

std::string error_line(std::string_view message) { return fmt::format("ferry: error: {}", message); }

void print_error(std::string_view message) { fmt::print(stderr, "{}\n", error_line(message)); }

int report(tracing::action& act, const error_code& ec, const diagnostics& diag, int code) {
  act.fail(ec, diag);
  if (ec == boost::asio::error::operation_aborted) return exit_code::interrupted;
  print_error(describe(ec, diag));
  return ec == errc::no_storage || ec.category() == config::category() ? exit_code::usage : code;
}

}  // namespace ferry::agent
