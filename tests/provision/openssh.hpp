#pragma once
// Test helpers around OpenSSH's own client, the independent witness for nodes: a client key made with
// ssh-keygen, commands run over `ssh`, and readiness's login check done by `ssh ... true`.
#include "provision/command.hpp"
#include "provision/readiness.hpp"

#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace ferry::test {

struct client_key {
  std::filesystem::path private_key;
  std::string public_line;  // "ssh-ed25519 AAAA... comment"
};

inline client_key make_client_key(const std::filesystem::path& dir) {
  const auto key = dir / "id_ed25519";
  const auto made = run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ferry-test", "-f", key.string()});
  if (made.exit_code != 0) throw std::runtime_error("ssh-keygen failed: " + made.err);
  auto line = read_file(std::filesystem::path(key).concat(".pub"));
  while (!line.empty() && line.back() == '\n') line.pop_back();
  return {key, line};
}

inline std::vector<std::string> ssh_argv(const std::filesystem::path& key, const std::string& user,
                                         const std::string& host, std::uint16_t port) {
  return {"ssh", "-i", key.string(), "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
          "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
          "-o", "ConnectTimeout=5", "-p", std::to_string(port), user + "@" + host};
}

// Runs `command` on the node with OpenSSH, to completion.
inline process_result ssh_exec(const std::filesystem::path& key, const provision::node& n, const std::string& command) {
  auto argv = ssh_argv(key, n.user, n.host, n.port);
  argv.push_back(command);
  return run(argv);
}

// readiness's login check, done by `ssh -i KEY ... true` as a child process.
inline boost::asio::awaitable<result<void>> openssh_true(const provision::node& n, std::filesystem::path key,
                                                         std::chrono::milliseconds timeout, diagnostics& diag) {
  auto argv = ssh_argv(key, n.user, n.host, n.port);
  argv.push_back("true");
  auto ran = co_await provision::run_command(argv, timeout, diag);
  if (!ran) co_return ran.error();
  if (ran->exit_code != 0) {
    diag.set(fmt::format("ssh {}@{}:{} true exited with {}: {}", n.user, n.host, n.port, ran->exit_code, ran->err));
    co_return make_error_code(sys::errc::connection_refused);
  }
  co_return result<void>{};
}

inline provision::login_check openssh_login(std::filesystem::path key,
                                            std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  // Not a coroutine itself: it hands its copies to openssh_true, whose frame keeps them.
  return [key, timeout](tracing::action&, const provision::node& n, diagnostics& diag) {
    return openssh_true(n, key, timeout, diag);
  };
}

}  // namespace ferry::test
