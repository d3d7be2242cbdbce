#pragma once
// The `local` provider, ferry's default: each node is a real sshd on this machine (see machine.hpp), with
// its own host key, empty home and cache dir, in its own network namespace when ferry runs as root. Node
// records live in `<state>/local/<id>/node.json` beside the node's files, so `list` needs nothing but the
// state dir, and nodes outlive the command that made them.
#include "provision/local/machine.hpp"
#include "provision/provider.hpp"

#include <chrono>
#include <filesystem>
#include <string>

namespace ferry::provision::local {

struct local_options {
  std::filesystem::path state_dir;          // <state>/local
  std::string public_key_line;              // authorized on every node: ferry's own key
  network_mode network = network_mode::netns;
  std::chrono::milliseconds boot_delay{0};  // nodes.boot_delay: pending this long, like a booting VM
  std::filesystem::path sshd = "/usr/sbin/sshd";
  std::chrono::milliseconds command_timeout{30000};  // nodes.local_command_timeout
  std::chrono::milliseconds lock_timeout{10000};     // nodes.registry_lock_timeout
};

class local_provider final : public provider {
 public:
  explicit local_provider(local_options options);

  std::string_view name() const override { return "local"; }
  asio::awaitable<result<std::vector<node>>> create(tracing::action& parent, const node_spec& spec,
                                                    diagnostics& diag) override;
  asio::awaitable<result<node>> describe(tracing::action& parent, const node& n, diagnostics& diag) override;
  asio::awaitable<result<void>> terminate(tracing::action& parent, const node& n, diagnostics& diag) override;
  asio::awaitable<result<std::vector<node>>> list(tracing::action& parent, diagnostics& diag) override;
  // Ends the node's sshd and its processes from inside (see self_stop.hpp).
  std::string self_stop_command(const node& n) const override;

  const local_options& options() const { return options_; }

 private:
  asio::awaitable<result<node>> create_one(tracing::action& parent, diagnostics& diag);
  asio::awaitable<result<node>> reserve(tracing::action& parent, diagnostics& diag);
  std::filesystem::path node_dir(std::string_view id) const { return options_.state_dir / id; }

  local_options options_;
};

// The node's state now, from its recorded machine and /proc; a terminated or stopped node says why in
// details.state_reason. A node whose sshd is gone is stopped when it stopped itself (self_stop.hpp),
// else terminated.
node with_current_state(node n);

}  // namespace ferry::provision::local
