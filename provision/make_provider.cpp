#include "provision/make_provider.hpp"

#include "net/aws_profile.hpp"
#include "provision/ec2/ec2_provider.hpp"
#include "provision/error.hpp"
#include "provision/local/local_provider.hpp"
#include "provision/ssh/ssh_provider.hpp"

#include <fmt/format.h>

#include <unistd.h>

namespace ferry::provision {
namespace {

error_code bad_config(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::bad_node_config);
}

result<std::unique_ptr<provider>> make_local(const config::settings& s, const std::string& public_key_line,
                                             diagnostics& diag) {
  const auto& n = s.nodes;
  const bool root = ::geteuid() == 0;
  if (n.local_network == "netns" && !root)
    return bad_config(diag, "nodes.local_network = \"netns\" needs root; use \"loopback\" or \"auto\"");
  if (public_key_line.empty()) return bad_config(diag, "the local provider needs ferry's public key to authorize");
  local::local_options o;
  o.state_dir = s.dirs.state / "local";
  o.public_key_line = public_key_line;
  o.network = n.local_network == "loopback" || (n.local_network == "auto" && !root) ? local::network_mode::loopback
                                                                                    : local::network_mode::netns;
  o.boot_delay = n.boot_delay;
  o.sshd = n.local_sshd;
  o.command_timeout = n.local_command_timeout;
  o.lock_timeout = n.registry_lock_timeout;
  return std::unique_ptr<provider>(std::make_unique<local::local_provider>(std::move(o)));
}

result<std::unique_ptr<provider>> make_ssh(const config::settings& s, diagnostics& diag) {
  if (s.nodes.ssh_hosts.empty())
    return bad_config(diag, "nodes.provider = \"ssh\" needs hosts in nodes.ssh_hosts, e.g. "
                            "ssh_hosts = [\"root@10.0.0.5\", { host = \"gpu1\", port = 2222 }]");
  ssh::ssh_options o;
  o.state_dir = s.dirs.state / "ssh";
  o.hosts = s.nodes.ssh_hosts;
  o.default_user = s.ssh.user;
  o.default_identity_file = s.ssh.identity_file;
  o.lock_timeout = s.nodes.registry_lock_timeout;
  return std::unique_ptr<provider>(std::make_unique<ssh::ssh_provider>(std::move(o)));
}

result<std::unique_ptr<provider>> make_ec2(boost::asio::any_io_executor io, const config::settings& s,
                                           const std::string& public_key_line, diagnostics& diag) {
  if (public_key_line.empty()) return bad_config(diag, "the ec2 provider needs ferry's public key to import");
  auto session = ec2::open_session(io, s, net::process_environment(), diag);
  if (!session) return session.error();
  return std::unique_ptr<provider>(std::make_unique<ec2::ec2_provider>(std::move(*session), s, public_key_line));
}

}  // namespace

result<std::unique_ptr<provider>> make_provider(boost::asio::any_io_executor io, const config::settings& s,
                                                const std::string& public_key_line, diagnostics& diag) {
  const auto& name = s.nodes.provider;
  if (name == "local") return make_local(s, public_key_line, diag);
  if (name == "ssh") return make_ssh(s, diag);
  if (name == "ec2") return make_ec2(std::move(io), s, public_key_line, diag);
  diag.set(fmt::format("nodes.provider = \"{}\" names no provider ferry has (local, ssh, ec2)", name));
  return make_error_code(errc::unknown_provider);
}

}  // namespace ferry::provision
