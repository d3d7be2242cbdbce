#pragma once
// The provider interface: how ferry gets nodes. A provider creates nodes for a spec, tells their state,
// terminates them and lists what it has. It does not wait for SSH: readiness.hpp does that, for every
// provider the same way. Every call is traced under the caller's action and fails with an error_code
// plus diagnostics naming the node or API call.
#include "provision/node.hpp"
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>
#include <vector>

namespace ferry::provision {

namespace asio = boost::asio;

// What the user asked for. Fields a provider cannot honour are ignored (the local and ssh providers
// have fixed machines); the ec2 provider picks the cheapest type that meets cpus, memory and spot.
struct node_spec {
  int count = 1;
  int min_cpus = 0;
  double min_memory_gib = 0;
  bool spot = false;
  std::optional<std::string> instance_type;  // ec2: use exactly this type, skip the catalogue
};

class provider {
 public:
  virtual ~provider() = default;

  virtual std::string_view name() const = 0;

  // Creates (or, for `ssh`, claims) `spec.count` nodes. Returns them as soon as the provider has
  // accepted them, usually still pending.
  virtual asio::awaitable<result<std::vector<node>>> create(tracing::action& parent, const node_spec& spec,
                                                            diagnostics& diag) = 0;

  // The provider's current state of one node (and any address it learned since create).
  virtual asio::awaitable<result<node>> describe(tracing::action& parent, const node& n, diagnostics& diag) = 0;

  // Ends a node. Terminating one already gone succeeds.
  virtual asio::awaitable<result<void>> terminate(tracing::action& parent, const node& n, diagnostics& diag) = 0;

  // Every node this provider knows of that ferry made (ec2: by tag; local: by its state dir).
  virtual asio::awaitable<result<std::vector<node>>> list(tracing::action& parent, diagnostics& diag) = 0;

  // How the node ends itself when its watchdog finds it idle (nodes.idle_timeout): a line for the node's
  // sh, run there as the login user, that stops the node for good (describe then says stopped or
  // terminated). Empty: the node must not stop itself (a machine ferry does not own), and gets no
  // watchdog. None by default.
  virtual std::string self_stop_command(const node&) const { return {}; }
};

}  // namespace ferry::provision
