#include "net/ssh_forward.hpp"

#include "net/cancellation.hpp"
#include "net/error.hpp"
#include "net/fan_out.hpp"
#include "net/task_group.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <vector>

namespace ferry::net {
namespace {

using tcp = asio::ip::tcp;
using clock = ssh_session::clock;

constexpr std::size_t chunk = 32 << 10;  // one SSH packet's worth

// The channel of one forwarded connection, given back to the session (and its slot) on every way out.
class forward_channel {
 public:
  forward_channel(std::shared_ptr<ssh_session> s, forward_target t)
      : session_(std::move(s)), busy_(*session_), target_(std::move(t)) {}
  forward_channel(const forward_channel&) = delete;
  forward_channel& operator=(const forward_channel&) = delete;
  ~forward_channel() {
    if (channel_) {
      channel_.reset();
      session_->note_io();  // the close libssh queued must be sent
    }
  }

  ssh_session& session() { return *session_; }
  ssh_channel native() { return channel_.get(); }
  std::string what() const { return fmt::format("a forward to {}:{}", target_.host, target_.port); }

  // A direct-tcpip channel is not a session: OpenSSH's MaxSessions does not count it, so it takes none of
  // the session's command slots.
  asio::awaitable<error_code> open(std::uint16_t local_port, diagnostics& diag) {
    const auto deadline = clock::now() + session_->settings().connect_timeout;
    channel_.reset(ssh_channel_new(session_->native()));
    if (!channel_) co_return session_->libssh_failure("creating a channel", diag);
    ssh_channel ch = channel_.get();
    for (;;) {
      const int rc = session_->call(
          [&] { return ssh_channel_open_forward(ch, target_.host.c_str(), target_.port, "127.0.0.1", local_port); });
      if (rc == SSH_OK) co_return error_code{};
      if (rc == SSH_ERROR) {
        auto ec = session_->libssh_failure(fmt::format("opening {}", what()), diag);
        // The node refused (nothing listens there, or forwarding is off): name the target.
        if (session_->is_open())
          diag.set(fmt::format("{} refused {}: {}", session_->peer().describe(), what(),
                               libssh::last_error(session_->native())));
        co_return ec;
      }
      const auto ec = co_await session_->wait_for_activity_until(deadline, diag);
      if (ec == make_error_code(errc::timeout))
        diag.set(fmt::format("opening {} on {}: no answer within {} ms (ssh.connect_timeout)", what(),
                             session_->peer().describe(), session_->settings().connect_timeout.count()));
      if (ec) co_return ec;
    }
  }

 private:
  std::shared_ptr<ssh_session> session_;
  ssh_session::busy_scope busy_;  // before the channel: the session counts as busy until it is freed
  forward_target target_;
  libssh::channel_ptr channel_;
};

struct forward_link {
  forward_channel& channel;
  tcp::socket& socket;
  forward_counts counts;
};

// The workstation's side to the node's: read from the socket, write as far as the window allows.
asio::awaitable<result<void>> to_node(forward_link& link, diagnostics& diag) {
  auto& session = link.channel.session();
  ssh_channel ch = link.channel.native();
  std::vector<char> buffer(chunk);
  for (;;) {
    error_code ec;
    const auto n = co_await link.socket.async_read_some(asio::buffer(buffer),
                                                        asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::eof) {
      if (session.call([ch] { return ssh_channel_send_eof(ch); }) == SSH_ERROR)
        co_return session.libssh_failure(fmt::format("closing {}", link.channel.what()), diag);
      co_return result<void>{};
    }
    if (ec) {
      diag.set(fmt::format("reading the workstation's side of {}: {}", link.channel.what(), ec.message()));
      co_return ec;
    }
    std::span<const char> pending(buffer.data(), n);
    while (!pending.empty()) {
      const auto size = session.output_backlog() ? 0 : std::min<std::size_t>(pending.size(), ssh_channel_window_size(ch));
      if (size == 0) {
        // No window, and none will come from a peer that closed: what is left of the upload is moot.
        if (ssh_channel_is_closed(ch) != 0) {
          diag.set(fmt::format("{} closed while the workstation's side still sent", link.channel.what()));
          co_return make_error_code(errc::connection_lost);
        }
        if (auto waited = co_await session.wait_for_activity(diag); waited) co_return waited;
        continue;
      }
      const int sent = session.call([&] { return ssh_channel_write(ch, pending.data(), static_cast<uint32_t>(size)); });
      if (sent == SSH_ERROR) co_return session.libssh_failure(fmt::format("writing to {}", link.channel.what()), diag);
      pending = pending.subspan(static_cast<std::size_t>(sent));
      link.counts.to_node += static_cast<std::uint64_t>(sent);
    }
  }
}

// The node's side to the workstation's: read what the channel holds, write it to the socket.
asio::awaitable<result<void>> from_node(forward_link& link, diagnostics& diag) {
  auto& session = link.channel.session();
  ssh_channel ch = link.channel.native();
  std::vector<char> buffer(chunk);
  for (;;) {
    const int n = session.call(
        [&] { return ssh_channel_read_nonblocking(ch, buffer.data(), static_cast<uint32_t>(buffer.size()), 0); });
    if (n == SSH_ERROR) co_return session.libssh_failure(fmt::format("reading from {}", link.channel.what()), diag);
    if (n > 0) {
      error_code ec;
      co_await asio::async_write(link.socket, asio::buffer(buffer.data(), static_cast<std::size_t>(n)),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        diag.set(fmt::format("writing to the workstation's side of {}: {}", link.channel.what(), ec.message()));
        co_return ec;
      }
      link.counts.from_node += static_cast<std::uint64_t>(n);
      continue;
    }
    if (n == SSH_EOF || ssh_channel_is_eof(ch) != 0 || ssh_channel_is_closed(ch) != 0) {
      error_code ignored;
      link.socket.shutdown(tcp::socket::shutdown_send, ignored);
      co_return result<void>{};
    }
    if (auto waited = co_await session.wait_for_activity(diag); waited) co_return waited;
  }
}

asio::awaitable<void> forward_one(tracing::action& parent, std::shared_ptr<ssh_session> session, tcp::socket socket,
                                  forward_target target) {
  error_code ignored;
  const auto from = socket.remote_endpoint(ignored);
  auto act = parent.child(action_types::ssh::forward,
                          {{"node", session->peer().node},
                           {"to", fmt::format("{}:{}", target.host, target.port)},
                           {"from", fmt::format("{}:{}", from.address().to_string(), from.port())}});
  diagnostics diag;
  auto moved = co_await forward_connection(std::move(session), std::move(socket), std::move(target), diag);
  if (!moved) {
    act.fail(moved.error(), diag);
    co_return;
  }
  act.succeed({{"to_node", moved->to_node}, {"from_node", moved->from_node}});
}

}  // namespace

asio::awaitable<result<forward_counts>> forward_connection(std::shared_ptr<ssh_session> session, tcp::socket socket,
                                                           forward_target target, diagnostics& diag) {
  error_code ignored;
  const auto local_port = socket.local_endpoint(ignored).port();
  forward_channel channel(std::move(session), std::move(target));
  if (auto ec = co_await channel.open(local_port, diag); ec) co_return ec;
  forward_link link{channel, socket, {}};
  // The first direction to fail cancels the other; cancelling the caller cancels both.
  auto moved = co_await fan_out(
      2, 2, [&link](std::size_t i, diagnostics& d) { return i == 0 ? to_node(link, d) : from_node(link, d); }, diag);
  socket.close(ignored);
  if (!moved) co_return moved.error();
  co_return link.counts;
}

asio::awaitable<void> serve_forwarding(tracing::action& parent, std::shared_ptr<ssh_session> session,
                                       tcp::acceptor& listener, forward_target target) {
  task_group connections(co_await asio::this_coro::executor);
  for (;;) {
    error_code ec;
    auto socket = co_await listener.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !listener.is_open()) break;
    if (ec) {
      // A connection that failed before it was accepted is the client's business; out of descriptors, the
      // next accept would fail at once as well: a pause, not a spin.
      asio::steady_timer pause(listener.get_executor(), std::chrono::milliseconds(100));
      error_code ignored;
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
      if (co_await cancelled()) break;
      continue;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    connections.spawn(forward_one(parent, session, std::move(socket), target));
  }
  error_code ignored;
  listener.close(ignored);
  connections.cancel();
  co_await connections.wait();
}

}  // namespace ferry::net
