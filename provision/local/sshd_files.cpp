#include "provision/local/sshd_files.hpp"

#include "provision/command.hpp"

#include <fmt/format.h>

namespace ferry::provision::local {
namespace {

// sshd_config splits arguments at spaces unless they are in double quotes.
std::string quoted(const std::filesystem::path& p) { return fmt::format("\"{}\"", p.string()); }

}  // namespace

std::string sshd_config_text(const sshd_layout& l) {
  std::string out = fmt::format("# Local node {}, written by ferry.\n", l.id);
  out += fmt::format("ListenAddress {}\nPort {}\n", l.address, l.port);
  out += fmt::format("HostKey {}\nAuthorizedKeysFile {}\n", quoted(l.host_key()), quoted(l.authorized_keys()));
  // Only ferry's key gets in; no PAM (no password prompts, no session modules writing to the host).
  out += "PidFile none\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
         "PermitRootLogin prohibit-password\n";
  // The state dir may sit under /tmp (mode 1777), which StrictModes would refuse for authorized_keys.
  out += "StrictModes no\nPrintMotd no\nPrintLastLog no\n";
  // OpenSSH 9.2's default post-quantum exchange costs ~70 ms of client CPU per connection.
  out += "KexAlgorithms curve25519-sha256\n";
  // ferry opens many sessions and channels at once to one node.
  out += "MaxSessions 100\nMaxStartups 100:30:200\n";
  out += "AcceptEnv LANG LC_* FERRY_*\nSubsystem sftp internal-sftp\n";
  out += fmt::format("SetEnv \"XDG_CACHE_HOME={}\"", l.cache().string());
  // Without a mount namespace the home can only be moved by the variable (the login still starts in the
  // passwd home, but nothing reads rc files from it).
  if (!l.own_mounts) out += fmt::format(" \"HOME={}\"", l.home().string());
  return out + "\n";
}

std::string boot_script_text(const sshd_layout& l) {
  std::string out =
      fmt::format("#!/bin/sh\n# Starts the sshd of local node {}; written by ferry, run detached.\n", l.id);
  if (l.boot_delay.count() > 0) out += fmt::format("sleep {:.3f}\n", l.boot_delay.count() / 1000.0);
  const auto sshd = fmt::format("exec {} -D -e -f {}", shell_quote(l.sshd.string()), shell_quote(l.config().string()));
  if (!l.own_mounts) return out + sshd + "\n";
  // In its own mount namespace: the login user's home is the node's empty dir (so no rc file of the host
  // runs at login), and /run/netns is let go, so that this namespace does not keep other nodes' network
  // namespaces alive after they are deleted. The namespace's id is left for terminate to find stragglers.
  // A node is shared by a pool's tenants, each its own Unix user: its /proc is a procfs of its own that
  // shows a user only its own processes (hidepid=invisible; root sees all), and its /var/cache, where the
  // node program keeps the tenants' shared layer cache, is the node's own empty dir.
  const auto inner = fmt::format(
      "readlink /proc/self/ns/mnt > {}\n"
      "umount -l /run/netns 2>/dev/null\n"
      "mount --bind {} {} || exit 1\n"
      "mount -t proc -o hidepid=invisible proc /proc || exit 1\n"
      "mkdir -p -m 755 {} && mount --bind {} /var/cache || exit 1\n"
      "{}",
      shell_quote(l.mount_ns().string()), shell_quote(l.home().string()), shell_quote(l.login_home.string()),
      shell_quote(l.var_cache().string()), shell_quote(l.var_cache().string()), sshd);
  const auto enter = l.netns.empty() ? std::string()
                                     : fmt::format("nsenter --net={} -- ", shell_quote("/run/netns/" + l.netns));
  return out + fmt::format("exec {}unshare --mount --propagation private -- /bin/sh -c {}\n", enter,
                           shell_quote(inner));
}

}  // namespace ferry::provision::local
