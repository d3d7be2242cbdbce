#include "net/ssh_session.hpp"

#include "net/cancellation.hpp"
#include "net/deadline.hpp"
#include "net/error.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <libssh/server.h>  // ssh_send_keepalive, which clients may use too


namespace ferry::net {
namespace {

using namespace asio::experimental::awaitable_operators;

// Reads the pump makes in one go before it lets parked coroutines run (each read is at most 4 KiB,
// libssh's buffer): enough to move data in bulk, few enough that no channel waits long.
constexpr int pump_budget = 64;

}  // namespace

std::string ssh_peer::describe() const { return fmt::format("node {} ({}:{})", node, host, port); }

std::shared_ptr<ssh_session> ssh_session::start(asio::ip::tcp::socket socket, libssh::session_ptr session,
                                                ssh_peer peer, const config::ssh_settings& settings) {
  std::shared_ptr<ssh_session> s(new ssh_session(std::move(socket), std::move(session), std::move(peer), settings));
  // The pump is detached: the session's owners end it by closing or dropping the session. An exception
  // (a bug) leaves io_context::run().
  asio::co_spawn(s->io_->socket.get_executor(), s->pump(s->io_), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  return s;
}

ssh_session::pump_io::pump_io(asio::ip::tcp::socket s)
    : socket(std::move(s)), kick(socket.get_executor()) {}

ssh_session::ssh_session(asio::ip::tcp::socket socket, libssh::session_ptr session, ssh_peer peer,
                         const config::ssh_settings& settings)
    : io_(std::make_shared<pump_io>(std::move(socket))), session_(std::move(session)), event_(ssh_event_new()),
      peer_(std::move(peer)), settings_(settings), wake_(io_->socket.get_executor()) {
  ssh_set_counters(session_.get(), &socket_counter_, &packet_counter_);
  if (!event_ || ssh_event_add_session(event_.get(), session_.get()) != SSH_OK)
    fail(make_error_code(errc::connection_lost), fmt::format("{}: cannot watch the SSH session", peer_.describe()));
  seen_packets_ = packet_counter_.in_packets;
  last_received_ = last_keepalive_ = idle_since_ = clock::now();
}

ssh_session::~ssh_session() {
  // The pump may still wait: it finds `alive` false when it wakes, and its frame keeps io_ until then.
  io_->alive = false;
  error_code ignored;
  io_->kick.notify();
  io_->socket.close(ignored);
  if (event_) {
    ssh_event_remove_session(event_.get(), session_.get());
    event_.reset();
  }
  // No channel is left (each command holds the session), so disconnecting frees nothing of ours.
  ssh_disconnect(session_.get());
  ssh_set_counters(session_.get(), nullptr, nullptr);
}

void ssh_session::close() { close_because(fmt::format("the SSH session to {} was closed", peer_.describe())); }

void ssh_session::close_because(std::string why) {
  if (failure_) return;
  if (busy_ == 0) {
    // Nobody holds a channel: a polite disconnect, which frees libssh's leftovers of closed channels.
    if (event_) {
      ssh_event_remove_session(event_.get(), session_.get());
      event_.reset();
    }
    ssh_disconnect(session_.get());
  }
  fail(make_error_code(errc::session_closed), std::move(why));
}

void ssh_session::fail(error_code ec, std::string text) {
  if (failure_) return;
  failure_ = ec;
  failure_text_ = std::move(text);
  slot_.reset();  // a session that ended holds no slot, however long its object lingers
  // The peer sees the end at once; libssh's descriptor is a dup, so the socket itself must be shut.
  error_code ignored;
  io_->socket.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  io_->socket.cancel(ignored);
  kick_pump();
  wake_all();
}

void ssh_session::wake_all() { wake_.notify(); }

void ssh_session::kick_pump() { io_->kick.notify(); }

error_code ssh_session::failure(diagnostics& diag) const {
  if (!failure_) return {};
  diag.set(failure_text_);
  return failure_;
}

void ssh_session::note_io() {
  if (failure_) return;
  if (packet_counter_.in_packets != seen_packets_) {
    seen_packets_ = packet_counter_.in_packets;
    last_received_ = clock::now();
    wake_all();
  }
  if (ssh_get_status(native()) & (SSH_CLOSED | SSH_CLOSED_ERROR)) {
    fail(make_error_code(errc::connection_lost),
         fmt::format("the SSH connection to {} was lost: {}", peer_.describe(), libssh::last_error(native())));
    return;
  }
  if (pump_waiting_ && !pump_waits_for_write_ && (ssh_get_poll_flags(native()) & SSH_WRITE_PENDING)) kick_pump();
}

error_code ssh_session::libssh_failure(std::string_view doing, diagnostics& diag) {
  note_io();
  if (failure_) return failure(diag);
  diag.set(fmt::format("{} on {}: {}", doing, peer_.describe(), libssh::last_error(native())));
  return make_error_code(errc::ssh_channel_failed);
}

bool ssh_session::output_backlog() const { return (ssh_get_status(native()) & SSH_WRITE_PENDING) != 0; }

asio::awaitable<error_code> ssh_session::wait_for_activity(diagnostics& diag) {
  if (failure_) co_return failure(diag);
  error_code ec;
  co_await wake_.wait(ec);
  if (co_await cancelled()) co_return error_code(asio::error::operation_aborted);
  co_return failure(diag);
}

asio::awaitable<error_code> ssh_session::wait_for_activity_until(clock::time_point deadline, diagnostics& diag) {
  if (failure_) co_return failure(diag);
  if (clock::now() >= deadline) co_return make_error_code(errc::timeout);
  error_code wake_ec;
  const bool woken = co_await with_deadline(wake_.wait(wake_ec), deadline);
  if (co_await cancelled()) co_return error_code(asio::error::operation_aborted);
  if (failure_) co_return failure(diag);
  if (!woken) co_return make_error_code(errc::timeout);
  co_return error_code{};
}

bool ssh_session::channel_available(bool for_kill) const {
  if (channel_limit_ == 0) return true;
  const int usable = for_kill ? channel_limit_ : std::max(1, channel_limit_ - 1);
  return open_channels_ < usable;
}

void ssh_session::channel_closed() {
  --open_channels_;
  wake_all();
}

void ssh_session::learn_channel_limit(int limit) {
  channel_limit_ = channel_limit_ == 0 ? std::max(1, limit) : std::min(channel_limit_, std::max(1, limit));
}

ssh_session::busy_scope::busy_scope(ssh_session& s) : session_(s) { ++session_.busy_; }

ssh_session::busy_scope::~busy_scope() {
  if (--session_.busy_ == 0) {
    session_.idle_since_ = clock::now();
    session_.kick_pump();  // the idle deadline starts now
  }
}

// Lets libssh read and write what the socket allows, up to the budget. True when the budget ran out
// with data perhaps still waiting.
bool ssh_session::drive_io() {
  bool moved = false;
  for (int i = 0; i < pump_budget; ++i) {
    const int rc = ssh_event_dopoll(event_.get(), 0);
    note_io();
    if (failure_) return false;
    if (rc == SSH_ERROR) {
      fail(make_error_code(errc::connection_lost),
           fmt::format("the SSH connection to {} was lost: {}", peer_.describe(), libssh::last_error(native())));
      return false;
    }
    if (rc == SSH_AGAIN) break;
    moved = true;
    if (i + 1 == pump_budget) {
      wake_all();
      return true;
    }
  }
  // Output that drained lets writers go on, as arriving packets let readers.
  if (moved) wake_all();
  return false;
}

// Until the socket is readable (or writable, when libssh has output waiting) or the session kicks the pump.
asio::awaitable<void> ssh_session::wait_for_io(std::shared_ptr<pump_io> io, bool want_write) {
  using asio::redirect_error;
  using asio::use_awaitable;
  error_code read_ec, write_ec, kick_ec;  // whichever ended the wait, the pump looks at libssh again
  if (want_write)
    co_await (io->socket.async_wait(asio::socket_base::wait_read, redirect_error(use_awaitable, read_ec)) ||
              io->socket.async_wait(asio::socket_base::wait_write, redirect_error(use_awaitable, write_ec)) ||
              io->kick.wait(kick_ec));
  else
    co_await (io->socket.async_wait(asio::socket_base::wait_read, redirect_error(use_awaitable, read_ec)) ||
              io->kick.wait(kick_ec));
}

asio::awaitable<void> ssh_session::pump(std::shared_ptr<pump_io> io) {
  for (;;) {
    // After every suspension: the session may be gone, and then nothing of it may be touched.
    if (!io->alive || failure_) co_return;
    if (drive_io()) {
      co_await asio::post(io->socket.get_executor(), asio::use_awaitable);
      continue;
    }
    check_deadlines();
    if (failure_) co_return;
    const bool want_write = (ssh_get_poll_flags(native()) & SSH_WRITE_PENDING) != 0;
    pump_waiting_ = true;
    pump_waits_for_write_ = want_write;
    // The deadline is the next keepalive, dead-peer or idle check: reaching it just runs the loop again.
    co_await with_deadline(wait_for_io(io, want_write), next_deadline());
    if (!io->alive) co_return;
    pump_waiting_ = false;
  }
}

ssh_session::clock::time_point ssh_session::next_deadline() const {
  auto next = clock::time_point::max();
  if (settings_.alive_timeout.count() > 0) next = std::min(next, last_received_ + settings_.alive_timeout);
  if (settings_.keepalive_interval.count() > 0)
    next = std::min(next, std::max(last_received_, last_keepalive_) + settings_.keepalive_interval);
  if (busy_ == 0 && settings_.idle_timeout.count() > 0) next = std::min(next, idle_since_ + settings_.idle_timeout);
  return next;
}

void ssh_session::check_deadlines() {
  const auto now = clock::now();
  if (settings_.alive_timeout.count() > 0 && now - last_received_ >= settings_.alive_timeout) {
    fail(make_error_code(errc::peer_unresponsive),
         fmt::format("{} stopped answering: nothing came back for {} ms, keepalives included (ssh.alive_timeout)",
                     peer_.describe(), settings_.alive_timeout.count()));
    return;
  }
  if (busy_ == 0 && settings_.idle_timeout.count() > 0 && now - idle_since_ >= settings_.idle_timeout) {
    close_because(fmt::format("the SSH session to {} was closed after {} ms unused (ssh.idle_timeout)",
                              peer_.describe(), settings_.idle_timeout.count()));
    return;
  }
  if (settings_.keepalive_interval.count() > 0 &&
      now - std::max(last_received_, last_keepalive_) >= settings_.keepalive_interval)
    send_keepalive();
}

// "keepalive@openssh.com" with want-reply: the peer must answer it, and any answer counts as life.
// libssh tracks one global request at a time: the first call settles the previous request if its
// answer came (sending nothing), the second sends a new one; while an answer is still due, neither
// sends, so at most one keepalive is ever outstanding.
void ssh_session::send_keepalive() {
  call([&] { return ssh_send_keepalive(native()); });
  call([&] { return ssh_send_keepalive(native()); });
  last_keepalive_ = clock::now();
}

}  // namespace ferry::net
