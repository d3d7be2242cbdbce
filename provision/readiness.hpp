#pragma once
// Waiting until nodes can run commands, for every provider alike: first until the provider says a node
// runs, then until it answers SSH (TCP connect, the server's SSH-2.0 banner, then a login that runs
// `true`). The schedule and stages are readiness_core's; this is the async shell that carries them out.
//
// The login goes through a callback, so that this code does not depend on any one SSH client: ferry's
// libssh session in production, OpenSSH's `ssh` in tests.
#include "config/settings.hpp"
#include "provision/poll_schedule.hpp"
#include "provision/provider.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <vector>

namespace ferry::provision {

// Logs into the node and runs `true`; succeeds when that exits with 0.
using login_check =
    std::function<boost::asio::awaitable<result<void>>(tracing::action& parent, const node& n, diagnostics& diag)>;

struct readiness_options {
  poll_policy poll;                                   // nodes.poll_initial, nodes.poll_max, nodes.ready_timeout
  std::chrono::milliseconds attempt_timeout{10000};   // ssh.connect_timeout: each connect, banner and login
  int max_parallel = 64;                              // ssh.max_sessions: nodes waited for at once
};

readiness_options readiness_options_from(const config::settings& s);

// Until the provider says the node runs. Returns the node as last described (it may have learned its
// address meanwhile). Fails with not_running_in_time, node_terminated, or a describe error that retrying
// cannot cure; diag names the node.
boost::asio::awaitable<result<node>> wait_until_running(tracing::action& parent, provider& p, const node& n,
                                                        const readiness_options& options, diagnostics& diag);

// Until a node that runs answers SSH and `login` succeeds. Fails with ssh_not_ready_in_time (diag gives the
// last attempt's failure) or node_terminated (the node died meanwhile).
boost::asio::awaitable<result<void>> wait_for_ssh(tracing::action& parent, provider& p, const node& n,
                                                  const login_check& login, const readiness_options& options,
                                                  diagnostics& diag);

// Both, under one deadline (nodes.ready_timeout).
boost::asio::awaitable<result<node>> wait_ready(tracing::action& parent, provider& p, const node& n,
                                                const login_check& login, const readiness_options& options,
                                                diagnostics& diag);

struct ready_outcome {
  node n;          // as last described
  error_code error;
  diagnostics diag;
};

// wait_ready for every node, in parallel (at most options.max_parallel at once); one outcome per node, in
// the order given.
boost::asio::awaitable<std::vector<ready_outcome>> wait_ready_each(tracing::action& parent, provider& p,
                                                                   const std::vector<node>& nodes,
                                                                   const login_check& login,
                                                                   const readiness_options& options);

// wait_ready_each, as one result: the ready nodes, or the first failure's code with diag naming every node
// that failed and why.
boost::asio::awaitable<result<std::vector<node>>> wait_ready_all(tracing::action& parent, provider& p,
                                                                 const std::vector<node>& nodes,
                                                                 const login_check& login,
                                                                 const readiness_options& options, diagnostics& diag);

}  // namespace ferry::provision
