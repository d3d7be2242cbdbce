#include "agent/provide/pool_node_maker.hpp"

#include "agent/error.hpp"
#include "agent/provide/node_access.hpp"
#include "agent/provide/node_watchdog.hpp"
#include "agent/provide/warm_nodes.hpp"
#include "net/ssh_known_hosts.hpp"
#include "provision/readiness.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

namespace ferry::agent {

namespace asio = boost::asio;

int pool_node_index(std::string_view node_id) {
  constexpr std::string_view prefix = "node-";
  if (!node_id.starts_with(prefix)) return -1;
  int out = 0;
  for (const char c : node_id.substr(prefix.size())) {
    if (c < '0' || c > '9' || out > 100000) return -1;
    out = out * 10 + (c - '0');
  }
  return out;
}

config::settings pool_node_settings(const config::settings& s) {
  auto out = s;
  out.dirs.state = s.dirs.state / "pool";
  out.nodes.min_nodes = s.pool.min_nodes;
  out.nodes.max_nodes = s.pool.max_nodes;
  out.nodes.idle_timeout = s.pool.idle_timeout;
  return out;
}

provision::node node_of_record(const pool::pool_record& r, const config::settings& s) {
  provision::node n;
  n.id = r.provider_id;
  n.provider = r.provider;
  n.name = r.node_id;
  n.host = r.address;
  n.port = static_cast<std::uint16_t>(r.ssh_port);
  n.user = r.user;
  n.state = provision::node_state::running;
  n.created_at = r.created_at;
  const auto watched = watchdog_settings::from(pool_node_settings(s));
  note_watchdog(n, &watched);
  return n;
}

pool_node_maker::pool_node_maker(const command_context& ctx, const pool_access& pool, provision::provider& provider,
                                 provision::readiness_options readiness)
    : ctx_(ctx), pool_(pool), provider_(provider), readiness_(std::move(readiness)) {}

pool::pool_nodes pool_node_maker::callbacks() {
  pool::pool_nodes out;
  out.make = [this](tracing::action& act, const std::string& node_id, diagnostics& diag) {
    return make(act, node_id, diag);
  };
  out.end = [this](tracing::action& act, const pool::new_node& made, diagnostics& diag) {
    return end(act, made, diag);
  };
  return out;
}

std::shared_ptr<net::node_link> pool_node_maker::take_link(const std::string& provider_id) {
  auto it = links_.find(provider_id);
  if (it == links_.end()) return nullptr;
  auto out = std::move(it->second);
  links_.erase(it);
  return out;
}

asio::awaitable<result<pool::new_node>> pool_node_maker::make(tracing::action& act, std::string node_id,
                                                              diagnostics& diag) {
  provision::node_spec spec;
  spec.count = 1;
  auto created = co_await provider_.create(act, spec, diag);
  if (!created) co_return created.error();
  if (created->empty()) {
    diag.set(fmt::format("{} made no node for the pool", provider_.name()));
    co_return make_error_code(errc::pool_cannot_grow);
  }
  auto n = std::move(created->front());
  made_[n.id] = n;
  std::shared_ptr<net::node_link> link;
  const auto login = ssh_login_check(pool_.ssh, &link);
  auto ready = co_await provision::wait_ready(act, provider_, n, login, readiness_, diag);
  if (!ready || !link) {
    const error_code ec = ready ? error_code(errc::pool_cannot_grow) : ready.error();
    diagnostics d;
    (void)co_await provider_.terminate(act, n, d);
    made_.erase(n.id);
    co_return ec;
  }
  n = std::move(*ready);
  auto key = net::recorded_host_key(pool_.ssh.known_hosts, n.id, diag);
  if (!key || !*key) {
    diagnostics d;
    (void)co_await provider_.terminate(act, n, d);
    made_.erase(n.id);
    if (key) diag.set(fmt::format("node {} logged in without a host key on record", n.id));
    co_return key ? make_error_code(errc::pool_cannot_grow) : key.error();
  }
  // Beyond the minimum, the node stops itself once idle; the first min_nodes names stay.
  const auto settings = pool_node_settings(ctx_.config.values);
  const auto watch = watchdog_settings::from(settings);
  const auto stop = provider_.self_stop_command(n);
  const int index = pool_node_index(node_id);
  if (watch.enabled() && !stop.empty() && (index < 0 || index >= settings.pool.min_nodes)) {
    diagnostics d;
    if (auto installed = co_await install_watchdog(act, *link, n, stop, watch, d); !installed)
      act.log(action_types::provision::watchdog_failed, {{"node", n.id}, {"reason", describe(installed.error(), d)}});
  }
  links_[n.id] = std::move(link);
  pool::new_node out;
  out.provider = std::string(provider_.name());
  out.provider_id = n.id;
  out.address = n.host;
  out.ssh_port = n.port;
  out.user = n.user;
  out.host_key = (*key)->type + " " + (*key)->base64;
  out.capacity = settings.pool.node_slots;
  co_return out;
}

asio::awaitable<result<void>> pool_node_maker::end(tracing::action& act, pool::new_node made, diagnostics& diag) {
  if (auto link = take_link(made.provider_id)) link->close();
  auto it = made_.find(made.provider_id);
  if (it == made_.end()) {
    diag.set(fmt::format("node {} was not made here", made.provider_id));
    co_return make_error_code(errc::pool_cannot_grow);
  }
  auto n = it->second;
  made_.erase(it);
  co_return co_await provider_.terminate(act, n, diag);
}

}  // namespace ferry::agent
