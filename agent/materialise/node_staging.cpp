#include "agent/materialise/node_staging.hpp"

#include "agent/error.hpp"
#include "net/cancellation.hpp"
#include "net/shell_quote.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <fmt/format.h>

#include <cstdio>

namespace ferry::agent {

asio::awaitable<error_code> stage_all(tracing::action& job_act, net::node_link& link, const std::vector<stage_plan>& plans,
                                      const stage_options& options, diagnostics& diag) {
  co_await net::accept_cancellation();
  for (const auto& plan : plans) {
    auto staged = co_await stage(job_act, link, plan, options, diag);
    if (!staged) co_return staged.error();
  }
  co_return error_code{};
}

std::string streamed_dirs_line(const std::vector<stage_plan>& plans, const std::string& runner) {
  std::vector<std::string> argv{"mkdir", "-p", "--"};
  for (const auto& plan : plans) argv.push_back(plan.node_dir);
  return (runner.empty() ? std::string() : runner + " ") + net::quote_argv(argv) + " || exit 1\n";
}

// A stream that fails is said at once, not only when the command ends (which may be hours later): the
// command goes on, and the run still ends with the staging error.
void start_stager(asio::any_io_executor ex, tracing::action& job_act, net::node_link& link,
                  const std::vector<stage_plan>& plans, const stage_options& options, stager& s) {
  s.done = std::make_unique<net::async_event>(ex);
  auto node = link.node();
  asio::co_spawn(ex, stage_all(job_act, link, plans, options, s.diag),
                 asio::bind_cancellation_slot(s.stop.slot(), [&s, node](std::exception_ptr e, error_code ec) {
                   s.error = e ? error_code(errc::stage_failed) : ec;
                   if (e) s.diag.set("staging ended with an internal error");
                   if (s.error && s.error != asio::error::operation_aborted)
                     fmt::print(stderr, "ferry: staging onto {} failed while the command runs: {}\n", node,
                                describe(s.error, s.diag));
                   s.done->set();
                 }));
}

asio::awaitable<void> stop_stager(stager& s) {
  if (!s.done->is_set()) s.stop.emit(asio::cancellation_type::total);
  // The command is over (or cancelled): nothing may cut this wait short, the stager refers to this frame.
  co_await asio::this_coro::reset_cancellation_state();
  while (!s.done->is_set()) (void)co_await s.done->wait();
}

}  // namespace ferry::agent
