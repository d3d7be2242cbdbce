#pragma once
// One logged-in SSH connection to a node, driven by Asio (net/ssh_connect.hpp makes one).
//
// The TCP socket belongs to Asio and libssh runs non-blocking on a dup of it. Every libssh call is
// made first; when it cannot finish (SSH_AGAIN) its coroutine parks until the session has news. One
// coroutine per session, the pump, owns socket readiness: it waits for the socket to become readable
// (or writable while libssh holds unsent bytes), lets libssh read and write what it can, and then wakes
// every parked coroutine so each can look at its own channel again. Parked coroutines are also woken
// when a packet arrives through a libssh call made by another channel (libssh reads whatever packet
// is next, whichever channel it belongs to), so no channel ever waits for another to be read.
//
// The pump also keeps the session honest: after `ssh.keepalive_interval` without a packet from the
// peer it sends a keepalive that the peer must answer; after `ssh.alive_timeout` without one the peer
// is gone, and every command on the session fails with errc::peer_unresponsive instead of hanging. A
// session with no command running for `ssh.idle_timeout` is closed. A zero setting turns its check off.
//
// Lifetime: a session is shared (std::shared_ptr); each running command holds it too. When the last
// owner lets go, the session disconnects. close() ends it at once: running commands fail with
// errc::session_closed (their remote processes are not killed: cancel a command to kill it).
//
// Everything here runs on the session's executor, which must not run handlers concurrently (ferry's
// single I/O thread). Nothing is thread_local.
#include "config/settings.hpp"
#include "net/notifier.hpp"
#include "net/session_slots.hpp"
#include "net/ssh_libssh.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace ferry::net {

namespace asio = boost::asio;

// Who a session talks to: the node id (as known_hosts and messages name it) and its address.
struct ssh_peer {
  std::string node;
  std::string host;
  std::uint16_t port = 22;
  std::string user;

  // "node n1 (127.0.0.1:2222)", for messages.
  std::string describe() const;
};

class ssh_session : public std::enable_shared_from_this<ssh_session> {
 public:
  using clock = std::chrono::steady_clock;

  // Takes over `session`, logged in over `socket` (libssh holds a dup of the socket's descriptor), and
  // starts the pump on the socket's executor.
  static std::shared_ptr<ssh_session> start(asio::ip::tcp::socket socket, libssh::session_ptr session, ssh_peer peer,
                                            const config::ssh_settings& settings);
  ~ssh_session();
  ssh_session(const ssh_session&) = delete;
  ssh_session& operator=(const ssh_session&) = delete;

  const ssh_peer& peer() const { return peer_; }
  const config::ssh_settings& settings() const { return settings_; }
  bool is_open() const { return !failure_; }
  // Ends the session now (see above). Idempotent.
  void close();
  // The slot of ssh.max_sessions this session holds (net/session_slots.hpp): given back when it closes.
  void hold_slot(session_slots::permit slot) { slot_ = std::move(slot); }

  // ---- For channels (net/ssh_exec): the libssh session and the waiting that goes with it. ----

  ssh_session_struct* native() const { return session_.get(); }

  // Makes one libssh call and notes what it did to the session (see note_io()).
  template <class F>
  auto call(F&& f) {
    auto r = f();
    note_io();
    return r;
  }
  // After any libssh call: a packet that arrived wakes every parked coroutine, bytes left unsent
  // make the pump wait for the socket to take them, and a connection libssh found dead fails the session.
  void note_io();

  // Parks until the session has news. Returns operation_aborted when this coroutine is cancelled, and
  // the session's failure when it failed or was closed.
  asio::awaitable<error_code> wait_for_activity(diagnostics& diag);
  // The same, failing with errc::timeout at `deadline` (the caller says what timed out).
  asio::awaitable<error_code> wait_for_activity_until(clock::time_point deadline, diagnostics& diag);

  // Wakes every parked coroutine, so each looks at its channel again: for news that comes from outside
  // the session (input for a command, net/exec_streams.hpp's input_source::ready()).
  void wake_waiters() { wake_all(); }

  // Why the session is not open, with its text in `diag`.
  error_code failure(diagnostics& diag) const;
  // A libssh call on this session failed while `doing` something: a dead connection fails the
  // session (errc::connection_lost), anything else is the channel's failure (errc::ssh_channel_failed).
  error_code libssh_failure(std::string_view doing, diagnostics& diag);

  // libssh holds bytes the socket has not taken yet: writers wait, so memory stays bounded.
  bool output_backlog() const;

  // Channel slots. OpenSSH caps the channels of one connection (MaxSessions, 10 by default) and refuses
  // more as "administratively prohibited". The session learns the cap from the first refusal; from then
  // on commands wait for a free channel, and ordinary ones leave one free for killing a cancelled command.
  bool channel_available(bool for_kill) const;
  void channel_opened() { ++open_channels_; }
  void channel_closed();  // wakes the commands waiting for a channel
  void learn_channel_limit(int limit);
  int open_channels() const { return open_channels_; }
  int channel_limit() const { return channel_limit_; }  // 0: not known

  // While a busy_scope lives, a command runs on the session and the idle deadline waits.
  class busy_scope {
   public:
    explicit busy_scope(ssh_session& s);
    ~busy_scope();
    busy_scope(const busy_scope&) = delete;
    busy_scope& operator=(const busy_scope&) = delete;

   private:
    ssh_session& session_;
  };

 private:
  ssh_session(asio::ip::tcp::socket socket, libssh::session_ptr session, ssh_peer peer,
              const config::ssh_settings& settings);

  // What the pump waits on. Its frame shares them with the session: Asio's waits (and the cancellation
  // handlers of the `||` they are part of) refer to their I/O objects until they complete, which is after
  // the session is gone when it goes while the pump waits.
  struct pump_io {
    explicit pump_io(asio::ip::tcp::socket s);
    asio::ip::tcp::socket socket;
    notifier kick;  // notified to make the pump look at libssh again
    bool alive = true;        // false once the session is gone: the pump must not touch it again
  };

  asio::awaitable<void> pump(std::shared_ptr<pump_io> io);
  static asio::awaitable<void> wait_for_io(std::shared_ptr<pump_io> io, bool want_write);
  bool drive_io();
  void check_deadlines();
  void send_keepalive();
  clock::time_point next_deadline() const;
  void close_because(std::string why);
  void fail(error_code ec, std::string text);
  void wake_all();
  void kick_pump();

  // The counters libssh updates; they must outlive the libssh session, hence declared before it.
  ssh_counter_struct socket_counter_{};
  ssh_counter_struct packet_counter_{};
  std::shared_ptr<pump_io> io_;
  session_slots::permit slot_;
  libssh::session_ptr session_;
  libssh::event_ptr event_;  // the pump's way to make libssh read and write without a channel
  ssh_peer peer_;
  config::ssh_settings settings_;

  // Never expires: cancelling it wakes every parked coroutine (each holds the session, so it outlives them).
  notifier wake_;

  error_code failure_;
  std::string failure_text_;
  std::uint64_t seen_packets_ = 0;
  clock::time_point last_received_;
  clock::time_point last_keepalive_;
  clock::time_point idle_since_;
  int busy_ = 0;
  int open_channels_ = 0;
  int channel_limit_ = 0;  // 0 while the node has not refused a channel
  bool pump_waiting_ = false;
  bool pump_waits_for_write_ = false;
};

}  // namespace ferry::net
