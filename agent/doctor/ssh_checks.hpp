#pragma once
// ferry's SSH key (ssh.identity_file, else <config dir>/id_ed25519) and its known_hosts file
// (<config dir>/known_hosts): there, private to their owner where that matters, and readable by ferry.
// Nothing is created or changed: a doctor looks. The doctor's one place that knows SSH's files.
#include "agent/doctor/check.hpp"
#include "config/settings.hpp"
#include "net/ssh_connect.hpp"

#include <filesystem>
#include <string>

namespace ferry::agent::doctor {

// The private key ferry logs in with: ssh.identity_file, else its own key in the config dir.
std::filesystem::path ssh_key_file(const config::settings& s);
std::filesystem::path ssh_key_file(const net::ssh_client_options& ssh);

// The public half of that key, as providers want it ("" when it does not load).
std::string ssh_public_line(const config::settings& s);

check_result check_ssh_key(tracing::action& parent, const config::settings& s);
check_result check_known_hosts(tracing::action& parent, const config::settings& s);

}  // namespace ferry::agent::doctor
