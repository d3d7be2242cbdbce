#pragma once
// Opening an SSH session to a node: TCP connect with Asio, then libssh's handshake, ferry's own host
// key check (net/ssh_known_hosts) and login, all non-blocking, all within `ssh.connect_timeout`.
//
// Login tries, in order: the configured `ssh.identity_file`, or else ferry's own ed25519 key
// (<config dir>/id_ed25519, made on first use); then ssh-agent, when SSH_AUTH_SOCK names one.
// Nothing of ~/.ssh (config, known_hosts, keys) is read.
#include "config/settings.hpp"
#include "net/session_slots.hpp"
#include "net/ssh_session.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <filesystem>
#include <memory>

namespace ferry::net {

struct ssh_client_options {
  config::ssh_settings settings;
  std::filesystem::path config_dir;   // where ferry's own key lives (id_ed25519, id_ed25519.pub)
  std::filesystem::path known_hosts;  // ferry's known_hosts, usually config_dir / "known_hosts"
  // ssh.max_sessions: every session opened with these options holds one until it goes. None: no limit.
  std::shared_ptr<session_slots> slots;

  // From ferry's settings: ssh.* and the XDG config directory.
  static ssh_client_options from(const config::settings& s);
};

// Connects to `peer` (an empty peer.user means ssh.user) as node `peer.node`, once a slot of
// options.slots is free (the wait is the field `slot_wait_ms`; connect_timeout starts after it). Traced as "ssh:connect"
// with "ssh:handshake" and "ssh:auth" inside. Fails with errc::timeout, connection_failed,
// name_resolution_failed, ssh_handshake_failed, host_key_changed, known_hosts_error or
// ssh_auth_failed, the node and its address named in `diag`.
asio::awaitable<result<std::shared_ptr<ssh_session>>> ssh_connect(tracing::action& parent, ssh_peer peer,
                                                                  const ssh_client_options& options,
                                                                  diagnostics& diag);

}  // namespace ferry::net
