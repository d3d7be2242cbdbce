#pragma once
// A local machine: a detached sshd with its own host key, home, cache dir and (as root) network
// namespace, started so that it outlives the ferry command that made it. The local provider makes one per
// node; tests of other providers use start_machine() to turn a fake cloud instance's private address into
// a real SSH host (e.g. moto's EC2 instances, at their 10.200.x.y addresses).
//
// The sshd runs in a session of its own, reparented to init once its launcher exits; everything needed
// to end it for sure is recorded: its pid with its start time (so a later process with the same pid is
// never mistaken for it), its network namespace and veth, and the id of its mount namespace.
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

namespace ferry::provision::local {

enum class network_mode { netns, loopback };

struct machine_spec {
  std::string id;                   // names the network namespace "ferry-<id>"
  std::filesystem::path dir;        // created; holds the node's config, keys, home, cache and sshd.log
  network_mode mode = network_mode::netns;
  std::string address;              // empty: a free one (netns: 10.200.x.y; loopback: 127.0.x.y)
  std::string authorized_key;       // one public key line, e.g. ferry's own key
  std::chrono::milliseconds boot_delay{0};  // sshd starts this long after start_machine returns
  std::filesystem::path sshd = "/usr/sbin/sshd";
  std::chrono::milliseconds command_timeout{30000};  // each set-up command
};

struct machine {
  std::string id;
  std::filesystem::path dir;
  network_mode mode = network_mode::netns;
  std::string address;
  std::uint16_t port = 22;
  std::string user;         // the login user: the user ferry runs as
  std::string netns;        // empty in loopback mode
  std::string veth;         // the host end; empty in loopback mode
  std::filesystem::path sshd;
  int pid = 0;
  std::uint64_t start_time = 0;
  std::string host_key;     // the sshd's public host key line, for known_hosts

  boost::json::object to_json() const;
  static machine from_json(const boost::json::object& o);
};

enum class machine_status { booting, running, gone };

// From /proc: gone once the sshd (or its launcher, during the boot delay) has exited.
machine_status status_of(const machine& m);

// The last line sshd wrote to its log, to say why a machine is gone ("" when there is none).
std::string last_log_line(const machine& m);

// Starts a machine; on failure nothing of it is left but its dir (with sshd.log, if it got that far).
// Fails with errc::local_setup_failed naming the machine and the step.
boost::asio::awaitable<result<machine>> start_machine(tracing::action& parent, const machine_spec& spec,
                                                      diagnostics& diag);

// Ends every process of the machine, then deletes its network namespace and veth. Its dir stays. Stopping
// one already gone succeeds. `timeout` bounds each command and the wait for the processes to go.
boost::asio::awaitable<result<void>> stop_machine(tracing::action& parent, const machine& m,
                                                  std::chrono::milliseconds timeout, diagnostics& diag);

}  // namespace ferry::provision::local
