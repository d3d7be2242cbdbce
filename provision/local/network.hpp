#pragma once
// A local node's place on the network. As root, each node gets a network namespace of its own
// ("ferry-<id>") holding one end of a veth pair as eth0 with its address 10.200.x.y/16; the other end
// ("ferryv-XXXX", XXXX the address's last two bytes in hex) is plugged into the host bridge ferry0, which
// holds 10.200.0.1/16. Nodes reach the host, and each other, over that bridge; nothing else is routed.
// Without root, a node gets a loopback address 127.0.x.y and a free port instead.
//
// The veth's name is derived from the address so that the kernel, which refuses a second link of the same
// name, hands out each address once across every ferry process on the machine, without a lock file.
#include "provision/command.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::provision::local {

inline constexpr std::string_view bridge_name = "ferry0";
inline constexpr std::string_view bridge_address = "10.200.0.1";
inline constexpr int prefix_length = 16;

// The host index (x * 256 + y) of 10.200.x.y, or nullopt for anything outside 10.200.0.0/16 and for the
// network, broadcast, bridge, .0 and .255 addresses.
std::optional<std::uint16_t> node_index(std::string_view address);
std::string node_address(std::uint16_t index);
std::string veth_name(std::uint16_t index);
std::string netns_name(std::string_view node_id);

// Addresses to try for a new node, starting at one derived from `seed` so that nodes made at once by
// different commands rarely try the same ones.
std::vector<std::uint16_t> candidate_indexes(std::string_view seed, std::size_t count);

// Runs `ip ARGS...`; a non-zero exit is errc::local_setup_failed with ip's words, unless its stderr holds
// one of `tolerated` ("File exists" where the goal is that something exists).
boost::asio::awaitable<result<command_result>> run_ip(tracing::action& act, const std::vector<std::string>& args,
                                                      std::chrono::milliseconds timeout, diagnostics& diag,
                                                      const std::vector<std::string_view>& tolerated);

// The bridge with its address, up; idempotent, and safe while other commands do the same.
boost::asio::awaitable<result<void>> ensure_bridge(tracing::action& act, std::chrono::milliseconds timeout,
                                                   diagnostics& diag);

// Creates the namespace and claims `index` by creating its veth pair into it: false (not an error) when
// another node holds that address; the namespace stays for the next try.
boost::asio::awaitable<result<bool>> claim_address(tracing::action& act, const std::string& netns,
                                                   std::uint16_t index, std::chrono::milliseconds timeout,
                                                   diagnostics& diag);

// Plugs the claimed veth into the bridge and configures eth0, lo and a default route inside the namespace.
boost::asio::awaitable<result<void>> configure_node_link(tracing::action& act, const std::string& netns,
                                                         std::uint16_t index, std::chrono::milliseconds timeout,
                                                         diagnostics& diag);

// Deletes the namespace and the veth; either being gone already is fine.
boost::asio::awaitable<result<void>> remove_node_network(tracing::action& act, const std::string& netns,
                                                         const std::string& veth, std::chrono::milliseconds timeout,
                                                         diagnostics& diag);

// Loopback mode: an address 127.0.x.y derived from `seed`, and a port nobody listened on a moment ago.
std::string loopback_address(std::string_view seed);
std::optional<std::uint16_t> free_port(const std::string& address);

}  // namespace ferry::provision::local
