#include "tracing/trace_conventions.hpp"

namespace ferry::tracing {

std::string trace_conventions::node_in(const boost::json::object& fields) const {
  const auto* v = fields.if_contains(node_field);
  if (!v) return {};
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_int64()) return std::to_string(v->get_int64());
  if (v->is_uint64()) return std::to_string(v->get_uint64());
  return {};
}

std::string trace_conventions::node_of(const tree_node& n) const {
  for (const auto* m : {n.start, n.end, n.message})
    if (m)
      if (auto node = node_in(m->fields); !node.empty()) return node;
  return {};
}

std::optional<double> trace_conventions::submitted_at(const tree_node& n) const {
  const auto* v = n.field(submitted_at_field);
  if (!v || !v->is_number()) return std::nullopt;
  return v->to_number<double>();
}

}  // namespace ferry::tracing
