#pragma once
// The text of a local node's sshd_config and of the boot script that starts its sshd, from the node's
// facts alone (sans-io, so tests read them without starting anything).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

namespace ferry::provision::local {

struct sshd_layout {
  std::string id;
  std::filesystem::path dir;            // holds everything below
  std::string address;
  std::uint16_t port = 22;
  std::string netns;                    // empty: the host's network
  bool own_mounts = true;               // root: a mount namespace whose login home is dir/home
  std::filesystem::path login_home;     // the login user's home in /etc/passwd, covered by dir/home
  std::filesystem::path sshd = "/usr/sbin/sshd";
  std::chrono::milliseconds boot_delay{0};

  std::filesystem::path home() const { return dir / "home"; }
  std::filesystem::path cache() const { return dir / "cache"; }
  // Covers /var/cache in the node's mount namespace: where a pool tenant's node keeps its shared layer
  // cache (agent/node/tenant_account.hpp), fresh per node as the home is.
  std::filesystem::path var_cache() const { return dir / "var-cache"; }
  std::filesystem::path host_key() const { return dir / "ssh_host_ed25519_key"; }
  std::filesystem::path authorized_keys() const { return dir / "authorized_keys"; }
  std::filesystem::path config() const { return dir / "sshd_config"; }
  std::filesystem::path boot_script() const { return dir / "boot.sh"; }
  std::filesystem::path log() const { return dir / "sshd.log"; }
  std::filesystem::path mount_ns() const { return dir / "mnt_ns"; }  // written by the boot script
};

std::string sshd_config_text(const sshd_layout& l);
std::string boot_script_text(const sshd_layout& l);

}  // namespace ferry::provision::local
