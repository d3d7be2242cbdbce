#pragma once
// The first two steps of an SSH readiness attempt, without any SSH library: a TCP connection to the node,
// then the server's identification line ("SSH-2.0-OpenSSH_9.2p1 ..."). A node whose port accepts but
// whose sshd is not up yet, or a middlebox that accepts anything, fails the second step.
#include "provision/node.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <string>

namespace ferry::provision {

// Connects to n.host:n.port (resolving a name) within `timeout`; traced as ferry:node:tcp_connect.
boost::asio::awaitable<result<boost::asio::ip::tcp::socket>> connect_to_node(tracing::action& parent, const node& n,
                                                                             std::chrono::milliseconds timeout,
                                                                             diagnostics& diag);

// Reads the server's identification line within `timeout` and returns it (without CR LF); lines before
// it are skipped, as RFC 4253 allows. Traced as ferry:node:ssh_banner.
boost::asio::awaitable<result<std::string>> read_ssh_banner(tracing::action& parent, const node& n,
                                                            boost::asio::ip::tcp::socket& socket,
                                                            std::chrono::milliseconds timeout, diagnostics& diag);

// Whether a line is an SSH 2 identification ("SSH-2.0-..." or the compatible "SSH-1.99-...").
bool is_ssh2_banner(std::string_view line);

}  // namespace ferry::provision
