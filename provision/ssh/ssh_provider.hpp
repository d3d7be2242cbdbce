#pragma once
// The `ssh` provider: machines that already exist (nodes.ssh_hosts). Creating a node claims the first
// hosts no ferry command holds; terminating it releases the claim and leaves the machine alone. Claims are
// a node registry of their own (`<state>/ssh/claims.json`), changed under its lock, so two commands never
// claim the same host.
#include "config/settings.hpp"
#include "provision/node_registry.hpp"
#include "provision/provider.hpp"

#include <chrono>
#include <filesystem>
#include <vector>

namespace ferry::provision::ssh {

struct ssh_options {
  std::filesystem::path state_dir;                    // <state>/ssh
  std::vector<config::nodes_settings::ssh_host> hosts;  // nodes.ssh_hosts, in the order they are claimed
  std::string default_user;                           // ssh.user
  std::string default_identity_file;                  // ssh.identity_file
  std::chrono::milliseconds lock_timeout{10000};      // nodes.registry_lock_timeout
};

class ssh_provider final : public provider {
 public:
  explicit ssh_provider(ssh_options options);

  std::string_view name() const override { return "ssh"; }
  asio::awaitable<result<std::vector<node>>> create(tracing::action& parent, const node_spec& spec,
                                                    diagnostics& diag) override;
  asio::awaitable<result<node>> describe(tracing::action& parent, const node& n, diagnostics& diag) override;
  asio::awaitable<result<void>> terminate(tracing::action& parent, const node& n, diagnostics& diag) override;
  asio::awaitable<result<std::vector<node>>> list(tracing::action& parent, diagnostics& diag) override;
  // None: the hosts are not ferry's to shut down, so they get no idle watchdog.
  std::string self_stop_command(const node&) const override { return {}; }

  // The node a configured host becomes when claimed ("ssh-<name>", running).
  node node_for(const config::nodes_settings::ssh_host& h) const;

 private:
  ssh_options options_;
  node_registry claims_;
};

}  // namespace ferry::provision::ssh
