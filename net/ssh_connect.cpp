#include "net/ssh_connect.hpp"

#include "net/cancellation.hpp"
#include "net/deadline.hpp"
#include "net/error.hpp"
#include "net/ssh_keys.hpp"
#include "net/ssh_known_hosts.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <fcntl.h>
#include <mutex>
#include <unistd.h>

namespace ferry::net {
namespace {

using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
using clock = std::chrono::steady_clock;

// libssh's own preference, which a recorded key's algorithms are put in front of.
constexpr std::string_view default_host_key_algorithms =
    "ssh-ed25519,ecdsa-sha2-nistp521,ecdsa-sha2-nistp384,ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256";

void init_libssh() {
  static std::once_flag once;
  std::call_once(once, [] {
    ssh_init();
    // libssh would print its warnings on stderr; its errors reach us through ssh_get_error().
    ssh_set_log_level(SSH_LOG_NOLOG);
  });
}

// libssh makes a descriptor blocking once it is connected; writes then could stall the I/O thread.
void make_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0 && !(flags & O_NONBLOCK)) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

error_code timed_out(const ssh_peer& peer, const ssh_client_options& o, std::string_view phase, diagnostics& diag) {
  diag.set(fmt::format("connecting to {}: no SSH login within {} ms (ssh.connect_timeout), stuck {}",
                       peer.describe(), o.settings.connect_timeout.count(), phase));
  return make_error_code(errc::timeout);
}

asio::awaitable<result<tcp::socket>> open_socket(const ssh_peer& peer, const ssh_client_options& o,
                                                 clock::time_point deadline, diagnostics& diag) {
  auto ex = co_await asio::this_coro::executor;
  tcp::resolver resolver(ex);
  error_code ec;
  auto resolved = co_await with_deadline(
      resolver.async_resolve(peer.host, std::to_string(peer.port), asio::redirect_error(asio::use_awaitable, ec)),
      deadline);
  if (co_await cancelled()) co_return error_code(asio::error::operation_aborted);
  if (!resolved) co_return timed_out(peer, o, "resolving the host name", diag);
  if (ec) {
    diag.set(fmt::format("connecting to {}: cannot resolve {}: {}", peer.describe(), peer.host, ec.message()));
    co_return make_error_code(errc::name_resolution_failed);
  }
  const auto endpoints = std::move(*resolved);
  tcp::socket socket(ex);
  auto connected = co_await with_deadline(
      asio::async_connect(socket, endpoints, asio::redirect_error(asio::use_awaitable, ec)), deadline);
  if (co_await cancelled()) co_return error_code(asio::error::operation_aborted);
  if (!connected) co_return timed_out(peer, o, "in the TCP connect", diag);
  if (ec) {
    diag.set(fmt::format("connecting to {}: {}", peer.describe(), ec.message()));
    co_return make_error_code(errc::connection_failed);
  }
  socket.set_option(tcp::no_delay(true), ec);
  co_return socket;
}

// The host key algorithms with those of the key on record first, so that a node with several host
// keys shows the one ferry knows.
std::string host_key_algorithms(const std::optional<public_key_info>& recorded) {
  if (!recorded) return std::string(default_host_key_algorithms);
  std::string first = recorded->type == "ssh-rsa" ? "rsa-sha2-512,rsa-sha2-256" : recorded->type;
  std::string out = first;
  std::string_view rest = default_host_key_algorithms;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const auto name = rest.substr(0, comma);
    if (("," + first + ",").find("," + std::string(name) + ",") == std::string::npos) out += "," + std::string(name);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

result<libssh::session_ptr> make_session(const ssh_peer& peer, const ssh_client_options& o, int fd,
                                         const std::optional<public_key_info>& recorded, diagnostics& diag) {
  libssh::session_ptr s(ssh_new());
  if (!s) {
    ::close(fd);
    diag.set("cannot allocate an SSH session");
    return make_error_code(errc::ssh_handshake_failed);
  }
  const unsigned int port = peer.port;
  const bool no = false;
  const int quiet = SSH_LOG_NOLOG;
  socket_t sock = fd;
  const auto algorithms = host_key_algorithms(recorded);
  // ~/.ssh stays out of it: no config file, and no known_hosts (libssh would order algorithms by them).
  ssh_options_set(s.get(), SSH_OPTIONS_LOG_VERBOSITY, &quiet);
  ssh_options_set(s.get(), SSH_OPTIONS_PROCESS_CONFIG, &no);
  ssh_options_set(s.get(), SSH_OPTIONS_KNOWNHOSTS, "/dev/null");
  ssh_options_set(s.get(), SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
  const bool ok = ssh_options_set(s.get(), SSH_OPTIONS_FD, &sock) == SSH_OK &&
                  ssh_options_set(s.get(), SSH_OPTIONS_HOST, peer.host.c_str()) == SSH_OK &&
                  ssh_options_set(s.get(), SSH_OPTIONS_PORT, &port) == SSH_OK &&
                  ssh_options_set(s.get(), SSH_OPTIONS_USER, peer.user.c_str()) == SSH_OK &&
                  ssh_options_set(s.get(), SSH_OPTIONS_HOSTKEYS, algorithms.c_str()) == SSH_OK;
  // Until ssh_connect() takes the descriptor over, closing it is ours to do.
  if (!ok) {
    ::close(fd);
    diag.set(fmt::format("connecting to {}: {}", peer.describe(), libssh::last_error(s.get())));
    return make_error_code(errc::ssh_handshake_failed);
  }
  if (!o.settings.kex.empty() && ssh_options_set(s.get(), SSH_OPTIONS_KEY_EXCHANGE, o.settings.kex.c_str()) != SSH_OK) {
    ::close(fd);
    diag.set(fmt::format("ssh.kex '{}' names no key exchange libssh knows: {}", o.settings.kex,
                         libssh::last_error(s.get())));
    return make_error_code(errc::ssh_handshake_failed);
  }
  ssh_set_blocking(s.get(), 0);
  return s;
}

// Until the socket is readable, or writable when libssh has output waiting: either way the step is
// tried again.
asio::awaitable<void> socket_ready(tcp::socket& socket, bool write_pending) {
  using asio::redirect_error;
  using asio::use_awaitable;
  error_code read_ec, write_ec;
  if (write_pending)
    co_await (socket.async_wait(tcp::socket::wait_read, redirect_error(use_awaitable, read_ec)) ||
              socket.async_wait(tcp::socket::wait_write, redirect_error(use_awaitable, write_ec)));
  else
    co_await socket.async_wait(tcp::socket::wait_read, redirect_error(use_awaitable, read_ec));
}

// Calls `step` until it returns something other than `again`, waiting on the socket in between as
// libssh asks (readable, or writable while it holds unsent bytes). Before the session exists there is
// no pump: the one coroutine logging in is the socket's only user.
template <class Step>
asio::awaitable<result<int>> drive(tcp::socket& socket, ssh_session_struct* s, clock::time_point deadline, int again,
                                   Step step) {
  for (;;) {
    const int rc = step();
    make_nonblocking(socket.native_handle());
    if (rc != again) co_return rc;
    const bool write_pending = (ssh_get_poll_flags(s) & SSH_WRITE_PENDING) != 0;
    const bool in_time = co_await with_deadline(socket_ready(socket, write_pending), deadline);
    if (co_await cancelled()) co_return error_code(asio::error::operation_aborted);
    if (!in_time) co_return make_error_code(errc::timeout);
  }
}

error_code handshake_failure(ssh_session_struct* s, const ssh_peer& peer, diagnostics& diag) {
  const auto why = libssh::last_error(s);
  diag.set(fmt::format("SSH handshake with {} failed: {}", peer.describe(), why));
  // A connection that drops during the handshake is a transport failure, worth another attempt.
  if (why.rfind("Socket error", 0) == 0) return make_error_code(errc::connection_failed);
  return make_error_code(errc::ssh_handshake_failed);
}

asio::awaitable<error_code> handshake(tracing::action& parent, tcp::socket& socket, ssh_session_struct* s,
                                      const ssh_peer& peer, const ssh_client_options& o, clock::time_point deadline,
                                      diagnostics& diag) {
  auto act = parent.child(action_types::ssh::handshake);
  const auto step = [s] { return ssh_connect(s); };
  auto rc = co_await drive(socket, s, deadline, SSH_AGAIN, step);
  error_code ec;
  if (!rc)
    ec = rc.error() == make_error_code(errc::timeout) ? timed_out(peer, o, "in the SSH handshake", diag) : rc.error();
  else if (*rc != SSH_OK)
    ec = handshake_failure(s, peer, diag);
  if (ec) {
    act.fail(ec, diag);
    co_return ec;
  }
  const char* kex = ssh_get_kex_algo(s);
  const char* cipher = ssh_get_cipher_out(s);
  act.succeed({{"kex", kex ? kex : ""}, {"cipher", cipher ? cipher : ""}});
  co_return error_code{};
}

error_code verify_host_key(tracing::action& parent, ssh_session_struct* s, const ssh_peer& peer,
                           const ssh_client_options& o, diagnostics& diag) {
  auto act = parent.child(action_types::ssh::host_key, {{"node", peer.node}, {"known_hosts", o.known_hosts.string()}});
  ssh_key raw = nullptr;
  error_code ec;
  if (ssh_get_server_publickey(s, &raw) != SSH_OK) {
    diag.set(fmt::format("{} presented no host key", peer.describe()));
    ec = make_error_code(errc::ssh_handshake_failed);
    act.fail(ec, diag);
    return ec;
  }
  libssh::key_ptr key(raw);
  auto info = describe_key(key.get());
  if (!info) {
    diag.set(fmt::format("{} presented a host key ferry cannot read", peer.describe()));
    act.fail(info.error(), diag);
    return info.error();
  }
  auto status = check_host_key(o.known_hosts, peer.node, *info, diag);
  if (!status) {
    act.fail(status.error(), diag);
    return status.error();
  }
  act.succeed({{"type", info->type},
               {"fingerprint", info->fingerprint},
               {"status", *status == host_key_status::known ? "known" : "trusted on first use"}});
  return {};
}

// One login method: SSH_AUTH_SUCCESS, DENIED or PARTIAL, or an error (timeout, a dead connection).
template <class Step>
asio::awaitable<result<int>> try_method(tcp::socket& socket, ssh_session_struct* s, clock::time_point deadline,
                                        Step step) {
  auto rc = co_await drive(socket, s, deadline, SSH_AUTH_AGAIN, step);
  if (!rc) co_return rc.error();
  if (*rc == SSH_AUTH_ERROR) co_return make_error_code(errc::connection_failed);
  co_return rc;
}

struct auth_outcome {
  error_code error;       // a failure that ends the login at once (timeout, lost connection)
  bool success = false;
  std::string method;     // what logged in
  std::string refused;    // what the node refused, for the message
  std::string unusable;   // why a key could not even be offered
};

// Takes a method's answer into `out`; true when it ended the login: logged in, or failed outright.
bool ended_login(const result<int>& rc, std::string method, auth_outcome& out) {
  if (!rc) {
    out.error = rc.error();
    return true;
  }
  if (*rc != SSH_AUTH_SUCCESS) return false;
  out.success = true;
  out.method = std::move(method);
  return true;
}

asio::awaitable<void> login_with_key(tcp::socket& socket, ssh_session_struct* s, const ssh_client_options& o,
                                     clock::time_point deadline, tracing::action& act, auth_outcome& out) {
  diagnostics key_diag;
  std::filesystem::path file = o.settings.identity_file;
  if (file.empty()) {
    auto line = ensure_own_key(o.config_dir, key_diag);
    file = own_key_path(o.config_dir);
    if (!line) {
      out.unusable = key_diag.message;
      co_return;
    }
  }
  auto key = load_private_key(file, key_diag);
  if (!key) {
    out.unusable = key_diag.message;
    co_return;
  }
  auto info = describe_key(key->get());
  const auto fingerprint = info ? info->fingerprint : std::string();
  act.log(action_types::ssh::auth_attempt,
          {{"method", "publickey"}, {"key_file", file.string()}, {"fingerprint", fingerprint}});
  const auto step = [s, k = key->get()] { return ssh_userauth_publickey(s, nullptr, k); };
  auto rc = co_await try_method(socket, s, deadline, step);
  if (ended_login(rc, "publickey " + fingerprint, out)) co_return;
  out.refused = fmt::format("the key {} ({})", file.string(), fingerprint);
}

asio::awaitable<void> login_with_agent(tcp::socket& socket, ssh_session_struct* s, clock::time_point deadline,
                                       tracing::action& act, auth_outcome& out) {
  const char* agent = std::getenv("SSH_AUTH_SOCK");
  if (!agent || !*agent) co_return;
  act.log(action_types::ssh::auth_attempt, {{"method", "agent"}, {"socket", agent}});
  const auto step = [s] { return ssh_userauth_agent(s, nullptr); };
  auto rc = co_await try_method(socket, s, deadline, step);
  if (ended_login(rc, "agent", out)) co_return;
  out.refused += fmt::format("{}the keys of ssh-agent ({})", out.refused.empty() ? "" : " and ", agent);
}

std::string login_refused(const ssh_peer& peer, const ssh_client_options& o, const auth_outcome& out) {
  const auto hint = fmt::format("put ferry's public key ({}.pub) in the node's authorized_keys, or set "
                                "ssh.identity_file, or offer a key through ssh-agent (SSH_AUTH_SOCK)",
                                own_key_path(o.config_dir).string());
  if (out.refused.empty())
    return fmt::format("cannot log in to {}: no key to offer ({}); {}", peer.describe(), out.unusable, hint);
  return fmt::format("{} refused the login of user {} with {}{}{}; {}", peer.describe(), peer.user, out.refused,
                     out.unusable.empty() ? "" : "; also: ", out.unusable, hint);
}

asio::awaitable<error_code> authenticate(tracing::action& parent, tcp::socket& socket, ssh_session_struct* s,
                                         const ssh_peer& peer, const ssh_client_options& o,
                                         clock::time_point deadline, diagnostics& diag) {
  auto act = parent.child(action_types::ssh::auth, {{"user", peer.user}});
  auth_outcome out;
  co_await login_with_key(socket, s, o, deadline, act, out);
  if (!out.success && !out.error) co_await login_with_agent(socket, s, deadline, act, out);
  error_code ec;
  if (out.error == make_error_code(errc::timeout))
    ec = timed_out(peer, o, "in the login", diag);
  else if (out.error == make_error_code(errc::connection_failed))
    ec = handshake_failure(s, peer, diag);
  else if (out.error)
    ec = out.error;
  else if (!out.success) {
    diag.set(login_refused(peer, o, out));
    ec = make_error_code(errc::ssh_auth_failed);
  }
  if (ec) {
    act.fail(ec, diag);
    co_return ec;
  }
  act.succeed({{"method", out.method}});
  co_return error_code{};
}

asio::awaitable<result<std::shared_ptr<ssh_session>>> connect_traced(tracing::action& act, ssh_peer peer,
                                                                     const ssh_client_options& o,
                                                                     diagnostics& diag) {
  const auto deadline = clock::now() + o.settings.connect_timeout;
  auto recorded = recorded_host_key(o.known_hosts, peer.node, diag);
  if (!recorded) co_return recorded.error();
  auto socket = co_await open_socket(peer, o, deadline, diag);
  if (!socket) co_return socket.error();
  const int fd = ::fcntl(socket->native_handle(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    diag.set(fmt::format("connecting to {}: cannot duplicate the socket", peer.describe()));
    co_return make_error_code(errc::connection_failed);
  }
  auto session = make_session(peer, o, fd, *recorded, diag);
  if (!session) co_return session.error();
  ssh_session_struct* s = session->get();
  if (auto ec = co_await handshake(act, *socket, s, peer, o, deadline, diag)) co_return ec;
  if (auto ec = verify_host_key(act, s, peer, o, diag)) co_return ec;
  if (auto ec = co_await authenticate(act, *socket, s, peer, o, deadline, diag)) co_return ec;
  make_nonblocking(socket->native_handle());
  co_return ssh_session::start(std::move(*socket), std::move(*session), std::move(peer), o.settings);
}

}  // namespace

ssh_client_options ssh_client_options::from(const config::settings& s) {
  return {s.ssh, s.dirs.config, s.dirs.config / "known_hosts",
          std::make_shared<session_slots>(static_cast<std::size_t>(std::max(1, s.ssh.max_sessions)))};
}

asio::awaitable<result<std::shared_ptr<ssh_session>>> ssh_connect(tracing::action& parent, ssh_peer peer,
                                                                  const ssh_client_options& options,
                                                                  diagnostics& diag) {
  init_libssh();
  if (peer.user.empty()) peer.user = options.settings.user;
  auto act = parent.child(action_types::ssh::connect,
                          {{"node", peer.node}, {"host", peer.host}, {"port", peer.port}, {"user", peer.user}});
  session_slots::permit slot;
  const auto asked = clock::now();
  if (options.slots) {
    auto got = co_await options.slots->acquire();
    if (!got) {
      diag.set(fmt::format("connecting to {}: cancelled while waiting for one of ssh.max_sessions ({})",
                           peer.describe(), options.slots->limit()));
      act.fail(got.error(), diag);
      co_return got.error();
    }
    slot = std::move(*got);
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - asked).count();
  auto session = co_await connect_traced(act, std::move(peer), options, diag);
  if (session) (*session)->hold_slot(std::move(slot));
  act.finish(session, diag, {{"slot_wait_ms", waited}});
  co_return session;
}

}  // namespace ferry::net
