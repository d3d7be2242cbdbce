#include "provision/node.hpp"

#include <boost/json/value.hpp>

#include <stdexcept>

namespace ferry::provision {

std::string_view to_string(node_state s) {
  switch (s) {
    case node_state::pending: return "pending";
    case node_state::running: return "running";
    case node_state::stopping: return "stopping";
    case node_state::stopped: return "stopped";
    case node_state::terminated: return "terminated";
    case node_state::orphaned: return "orphaned";
    case node_state::unknown: break;
  }
  return "unknown";
}

node_state node_state_from(std::string_view text) {
  for (auto s : {node_state::pending, node_state::running, node_state::stopping, node_state::stopped,
                 node_state::terminated, node_state::orphaned}) {
    if (to_string(s) == text) return s;
  }
  return node_state::unknown;
}

boost::json::object to_json(const node& n) {
  return {{"id", n.id},
          {"provider", n.provider},
          {"name", n.name},
          {"host", n.host},
          {"port", n.port},
          {"user", n.user},
          {"identity_file", n.identity_file.string()},
          {"state", to_string(n.state)},
          {"created_at", n.created_at},
          {"last_used_at", n.last_used_at},
          {"details", n.details}};
}

namespace {

std::string string_at(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::int64_t int_at(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_int64() ? v->get_int64() : (v && v->is_uint64() ? static_cast<std::int64_t>(v->get_uint64()) : 0);
}

}  // namespace

node node_from_json(const boost::json::object& o) {
  node n;
  n.id = string_at(o, "id");
  if (n.id.empty()) throw std::invalid_argument("node without an id");
  n.provider = string_at(o, "provider");
  n.name = string_at(o, "name");
  n.host = string_at(o, "host");
  n.port = static_cast<std::uint16_t>(int_at(o, "port"));
  if (n.port == 0) n.port = 22;
  n.user = string_at(o, "user");
  n.identity_file = string_at(o, "identity_file");
  n.state = node_state_from(string_at(o, "state"));
  n.created_at = int_at(o, "created_at");
  n.last_used_at = int_at(o, "last_used_at");
  if (const auto* d = o.if_contains("details"); d && d->is_object()) n.details = d->get_object();
  return n;
}

}  // namespace ferry::provision
