#pragma once
// A run's --stage plans (agent/materialise/stage.hpp) onto one node: all of them before its command, or,
// with a window, a stager beside the command that is stopped (its downloads killed) when the command ends.
#include "agent/materialise/stage.hpp"
#include "net/async_event.hpp"
#include "net/node_link.hpp"
#include "tracing/action.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <memory>
#include <string>
#include <vector>

namespace ferry::agent {

// Every plan onto one node, one after another; the first failure ends it.
asio::awaitable<error_code> stage_all(tracing::action& job_act, net::node_link& link, const std::vector<stage_plan>& plans,
                                      const stage_options& options, diagnostics& diag);

// `mkdir -p` of every streamed directory, as a line for the node's shell; through `runner` (a pool
// tenant's `ferry-node as-tenant USER --`, materialise.hpp's environment::runner) when not empty, so that
// the tenant's user makes them and its stager may write there.
std::string streamed_dirs_line(const std::vector<stage_plan>& plans, const std::string& runner = {});

// With a window the data streams in while the command runs: the stager is started first and stopped
// (its remote downloads killed) when the command ends, whoever ended it. It is always waited for.
struct stager {
  asio::cancellation_signal stop;
  std::unique_ptr<net::async_event> done;
  error_code error;
  diagnostics diag;
};

// Starts the stager; `plans`, `options`, `link` and `s` outlive it (stop_stager() waits for its end).
void start_stager(asio::any_io_executor ex, tracing::action& job_act, net::node_link& link,
                  const std::vector<stage_plan>& plans, const stage_options& options, stager& s);

// Stops the stager if it still runs, and waits for its end; not cancellable (it refers to the caller's frame).
asio::awaitable<void> stop_stager(stager& s);

}  // namespace ferry::agent
