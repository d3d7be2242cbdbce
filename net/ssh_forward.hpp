#pragma once
// Local port forwarding over a session ferry already holds (`ssh -L`, without a second login; what
// net/ssh_node_link.hpp's serve_forwarding runs): each TCP connection accepted on the workstation becomes
// a direct-tcpip channel to host:port as the node sees it, and bytes move both ways until both sides
// have closed. Nothing listens on the node; the listener is the
// caller's, bound where it chooses (127.0.0.1).
//
// Each direction moves one buffer at a time: a read from the socket goes out only as far as the channel's
// window allows, and the channel is read only after the socket took the previous chunk, so a slow end
// holds the other back instead of filling memory. An end-of-stream on one side is passed on as such
// (shutdown of the socket's sending side, an EOF on the channel), so request-response protocols that
// half-close work.
#include "net/node_link.hpp"
#include "net/ssh_session.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace ferry::net {

struct forward_counts {
  std::uint64_t to_node = 0;
  std::uint64_t from_node = 0;
};

// One accepted connection, until both directions ended, either failed, or the caller is cancelled (the
// channel and the socket are closed either way). The channel is opened within ssh.connect_timeout.
asio::awaitable<result<forward_counts>> forward_connection(std::shared_ptr<ssh_session> session,
                                                           asio::ip::tcp::socket socket, forward_target target,
                                                           diagnostics& diag);

// Accepts on `listener` until cancelled (a session that is gone fails each new connection at once), forwarding each connection beside the
// others (each a `ssh:forward` action under `parent`, with its byte counts); every one has ended when
// this returns. The listener is closed on the way out.
asio::awaitable<void> serve_forwarding(tracing::action& parent, std::shared_ptr<ssh_session> session,
                                       asio::ip::tcp::acceptor& listener, forward_target target);

}  // namespace ferry::net
