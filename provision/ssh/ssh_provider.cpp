#include "provision/ssh/ssh_provider.hpp"

#include "provision/error.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace ferry::provision::ssh {
namespace {

namespace asio = boost::asio;

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool holds(const std::vector<node>& nodes, std::string_view id) {
  return std::any_of(nodes.begin(), nodes.end(), [&](const node& n) { return n.id == id; });
}

}  // namespace

ssh_provider::ssh_provider(ssh_options options)
    : options_(std::move(options)), claims_(options_.state_dir / "claims.json", options_.lock_timeout) {}

node ssh_provider::node_for(const config::nodes_settings::ssh_host& h) const {
  node n;
  n.name = !h.name.empty() ? h.name : (h.port == 22 ? h.host : fmt::format("{}:{}", h.host, h.port));
  n.id = "ssh-" + n.name;
  n.provider = "ssh";
  n.host = h.host;
  n.port = static_cast<std::uint16_t>(h.port);
  n.user = h.user.empty() ? options_.default_user : h.user;
  n.identity_file = h.identity_file.empty() ? options_.default_identity_file : h.identity_file;
  // Nothing to boot: the machine is there. Readiness still checks that it answers.
  n.state = node_state::running;
  return n;
}

asio::awaitable<result<std::vector<node>>> ssh_provider::create(tracing::action& parent, const node_spec& spec,
                                                                diagnostics& diag) {
  auto act = parent.child(action_types::ssh_hosts::create, {{"count", spec.count}, {"hosts", options_.hosts.size()}});
  std::vector<node> claimed;
  const node_registry::change claim = [&](std::vector<node>& held, diagnostics& d) {
    for (const auto& h : options_.hosts) {
      if (static_cast<int>(claimed.size()) == spec.count) break;
      auto n = node_for(h);
      if (holds(held, n.id) || holds(claimed, n.id)) continue;
      n.created_at = n.last_used_at = unix_now();
      claimed.push_back(std::move(n));
    }
    if (static_cast<int>(claimed.size()) < spec.count) {
      d.set(fmt::format("asked for {} ssh nodes, but only {} of the {} hosts in nodes.ssh_hosts are unclaimed "
                        "(claims: {})",
                        spec.count, claimed.size(), options_.hosts.size(), claims_.file().string()));
      claimed.clear();
      return make_error_code(errc::no_free_hosts);
    }
    held.insert(held.end(), claimed.begin(), claimed.end());
    return error_code{};
  };
  auto done = co_await claims_.modify(act, action_types::registry::claim, claim, diag);
  act.finish(done, diag, {{"claimed", claimed.size()}});
  if (!done) co_return done.error();
  co_return claimed;
}

asio::awaitable<result<node>> ssh_provider::describe(tracing::action& parent, const node& n, diagnostics& diag) {
  auto act = parent.child(action_types::ssh_hosts::describe, {{"node", n.id}});
  auto held = claims_.load(diag);
  if (!held) {
    act.fail(held.error(), diag);
    co_return held.error();
  }
  const auto it = std::find_if(held->begin(), held->end(), [&](const node& c) { return c.id == n.id; });
  node out = it != held->end() ? *it : n;
  if (it == held->end()) {
    // Released (or never claimed): ended as far as ferry is concerned, though the machine runs on.
    out.state = node_state::terminated;
    out.details["state_reason"] = "not claimed in " + claims_.file().string();
  }
  act.succeed({{"state", to_string(out.state)}});
  co_return out;
}

asio::awaitable<result<void>> ssh_provider::terminate(tracing::action& parent, const node& n, diagnostics& diag) {
  auto act = parent.child(action_types::ssh_hosts::release, {{"node", n.id}});
  auto done = co_await claims_.remove(act, n.id, diag);
  act.finish(done, diag);
  co_return done;
}

asio::awaitable<result<std::vector<node>>> ssh_provider::list(tracing::action& parent, diagnostics& diag) {
  auto act = parent.child(action_types::ssh_hosts::list);
  auto held = claims_.load(diag);
  act.finish(held, diag);
  co_return held;
}

}  // namespace ferry::provision::ssh
