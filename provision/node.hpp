#pragma once
// A node: one machine ferry can reach over SSH, as a provider made it and the registry remembers it.
// Every provider (local, ssh, ec2) describes its nodes in this one shape, so readiness polling, the
// registry, `ferry nodes` and `ferry exec` never need to know which provider made a node.
#include <boost/json/object.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ferry::provision {

// The provider's view of a node's life. Readiness is a separate question (see readiness.hpp): a
// running machine may not answer SSH yet.
// orphaned: ferry asked the provider to end the node and the provider did not confirm it; the node may
// still run (and cost), so it stays in the registry until `ferry nodes down` ends it.
enum class node_state { pending, running, stopping, stopped, terminated, orphaned, unknown };

std::string_view to_string(node_state s);
node_state node_state_from(std::string_view text);  // unknown for anything unrecognised

struct node {
  std::string id;        // unique and stable across commands: "local-3f2a9c", "ssh-gpu1", "i-0abc..."
  std::string provider;  // "local", "ssh" or "ec2"
  std::string name;      // short, for humans and output prefixes: "node-1", a host alias, a Name tag
  std::string host;      // the address ferry connects to (IP or DNS name)
  std::uint16_t port = 22;
  std::string user;                       // the login user
  std::filesystem::path identity_file;    // empty: ferry's own key, then ssh-agent
  node_state state = node_state::pending;
  std::int64_t created_at = 0;            // unix seconds
  std::int64_t last_used_at = 0;          // unix seconds, updated when a command ran on it
  boost::json::object details;            // provider-specific: pid, netns, instance type, price...
};

boost::json::object to_json(const node& n);
node node_from_json(const boost::json::object& o);  // throws std::invalid_argument on a missing id

}  // namespace ferry::provision
