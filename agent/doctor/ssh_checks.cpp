#include "agent/doctor/ssh_checks.hpp"

#include "net/error.hpp"
#include "net/ssh_keys.hpp"
#include "net/ssh_known_hosts.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::agent::doctor {
namespace {

constexpr std::string_view key_check = "ssh.key";
constexpr std::string_view hosts_check = "ssh.known_hosts";

// Larger than any key or known_hosts file ferry writes: beyond it the file is not one of them.
constexpr std::uintmax_t max_file_bytes = 16u << 20;

std::string mode_text(const struct stat& st) { return fmt::format("{:04o}", st.st_mode & 07777); }

std::string missing_key_fix(const config::settings& s, const std::filesystem::path& file) {
  if (!s.ssh.identity_file.empty())
    return "point ssh.identity_file at a private key that exists, or unset it to use ferry's own key";
  return fmt::format("make it with `ssh-keygen -t ed25519 -N '' -C ferry -f {}`, or let `ferry nodes up` make it "
                     "on first use",
                     file.string());
}

// Lines of the file that name a node (known_hosts' format has no continuation lines).
std::size_t count_records(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.front() != '#') ++n;
  return n;
}

check_result key_result(const config::settings& s, const std::filesystem::path& file) {
  const auto name = std::string(key_check);
  const auto what = s.ssh.identity_file.empty() ? std::string("ferry's SSH key") : std::string("ssh.identity_file");
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return failed(name, fmt::format("{} {} does not exist", what, file.string()), missing_key_fix(s, file),
                    make_error_code(net::errc::ssh_key_error));
    return failed(name, fmt::format("cannot look at {} {}: {}", what, file.string(), std::strerror(errno)),
                  "make it and its directory readable by this user", make_error_code(net::errc::ssh_key_error));
  }
  if (auto problem = unreadable_kind(file, max_file_bytes))
    return failed(name, fmt::format("{} {}", what, *problem), missing_key_fix(s, file),
                  make_error_code(net::errc::ssh_key_error));
  if ((st.st_mode & 077) != 0)
    return failed(name,
                  fmt::format("{} {} is open to other users (mode {}): anyone on this machine who reads it can log "
                              "in to your nodes, and OpenSSH refuses such a key",
                              what, file.string(), mode_text(st)),
                  fmt::format("chmod 600 {}", file.string()), make_error_code(net::errc::ssh_key_error));
  // A key this user cannot read is not a bad key: replacing it (the invalid key's fix) would lose it.
  if (::access(file.c_str(), R_OK) != 0)
    return failed(name, fmt::format("ferry cannot read {} {}: {}", what, file.string(), std::strerror(errno)),
                  fmt::format("make it this user's and readable by its owner alone (chown $USER {0}; chmod 600 {0})",
                              file.string()),
                  make_error_code(net::errc::ssh_key_error));
  diagnostics diag;
  auto key = net::load_private_key(file, diag);
  if (!key)
    return failed(name, diag.message,
                  fmt::format("replace it with a private key without a passphrase, in OpenSSH or PEM format "
                              "(`ssh-keygen -t ed25519 -N '' -f {}`)",
                              file.string()),
                  key.error());
  auto info = net::describe_key(key->get());
  const auto described = info ? fmt::format("{} {}", info->type, info->fingerprint) : std::string("a key");
  return passed(name, fmt::format("{} ({}, mode {})", file.string(), described, mode_text(st)));
}

check_result hosts_result(const std::filesystem::path& file) {
  const auto name = std::string(hosts_check);
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return passed(name, fmt::format("{} is not there yet: ferry records each node's host key in it on first "
                                      "connection",
                                      file.string()));
    return failed(name, fmt::format("cannot look at {}: {}", file.string(), std::strerror(errno)),
                  "make it and its directory readable by this user", make_error_code(net::errc::known_hosts_error));
  }
  if (auto problem = unreadable_kind(file, max_file_bytes))
    return failed(name, *problem,
                  fmt::format("move it aside (`mv {0} {0}.old`): ferry records each node's host key anew on first "
                              "connection",
                              file.string()),
                  make_error_code(net::errc::known_hosts_error));
  if ((st.st_mode & 022) != 0)
    return failed(name,
                  fmt::format("{} can be written by other users (mode {}): anyone on this machine could make ferry "
                              "trust a forged host key",
                              file.string(), mode_text(st)),
                  fmt::format("chmod 600 {}", file.string()), make_error_code(net::errc::known_hosts_error));
  if (::access(file.c_str(), R_OK | W_OK) != 0)
    return failed(name, fmt::format("ferry cannot read and write {}: {}", file.string(), std::strerror(errno)),
                  fmt::format("make it this user's (chown, then chmod 600 {})", file.string()),
                  make_error_code(net::errc::known_hosts_error));
  diagnostics diag;
  // No node is named "": this reads and parses every line, and finds nothing.
  if (auto parsed = net::recorded_host_key(file, "", diag); !parsed)
    return failed(name, diag.message,
                  "correct or delete the line it names (a deleted node's key is trusted anew on its next connection)",
                  parsed.error());
  return passed(name, fmt::format("{} ({} nodes recorded, mode {})", file.string(), count_records(file), mode_text(st)));
}

}  // namespace

std::filesystem::path ssh_key_file(const config::settings& s) {
  return s.ssh.identity_file.empty() ? net::own_key_path(s.dirs.config) : std::filesystem::path(s.ssh.identity_file);
}

std::filesystem::path ssh_key_file(const net::ssh_client_options& ssh) {
  if (!ssh.settings.identity_file.empty()) return ssh.settings.identity_file;
  return net::own_key_path(ssh.config_dir);
}

std::string ssh_public_line(const config::settings& s) {
  diagnostics ignored;
  auto key = net::load_private_key(ssh_key_file(s), ignored);
  if (!key) return {};
  auto info = net::describe_key(key->get());
  return info ? fmt::format("{} {} ferry", info->type, info->base64) : std::string();
}

check_result check_ssh_key(tracing::action& parent, const config::settings& s) {
  auto act = open_check(parent, key_check);
  return close_check(act, key_result(s, ssh_key_file(s)));
}

check_result check_known_hosts(tracing::action& parent, const config::settings& s) {
  auto act = open_check(parent, hosts_check);
  return close_check(act, hosts_result(s.dirs.config / "known_hosts"));
}

}  // namespace ferry::agent::doctor
