#pragma once
// How a command ends on an expected failure: its root action fails with the error, the human text goes to
// stderr, and the exit code says what happened: interrupted when the error is the cancellation of Ctrl-C
// (the CLI says `interrupted` itself, once, whatever the command was doing), usage when the configuration
// lacks what the command needs (storage.url) or holds a value it cannot use (a malformed storage.url), else
// `code`.
#include "agent/error.hpp"
#include "agent/cli/exit_code.hpp"
#include "config/error.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>

#include <cstdio>

namespace ferry::agent {

inline int report(tracing::action& act, const error_code& ec, const diagnostics& diag,
                  int code = exit_code::failure) {
  act.fail(ec, diag);
  if (ec == boost::asio::error::operation_aborted) return exit_code::interrupted;
  fmt::print(stderr, "ferry: error: {}\n", describe(ec, diag));
  return ec == errc::no_storage || ec.category() == config::category() ? exit_code::usage : code;
}

}  // namespace ferry::agent
