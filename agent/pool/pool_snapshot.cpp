#include "agent/pool/pool_snapshot.hpp"

#include <algorithm>

namespace ferry::agent::pool {

const pool_entry* pool_snapshot::find(std::string_view node_id) const {
  const auto it = std::find_if(nodes.begin(), nodes.end(),
                               [&](const pool_entry& e) { return e.record.node_id == node_id; });
  return it == nodes.end() ? nullptr : &*it;
}

bool pool_snapshot::has_name(std::string_view node_id) const {
  return find(node_id) != nullptr || std::find(unreadable.begin(), unreadable.end(), node_id) != unreadable.end();
}

result<void> add_object(pool_snapshot& s, std::string node_id, std::string etag, std::string_view text,
                        diagnostics& diag) {
  // parse_record refuses a record whose node_id is not its object's name: a record copied under another
  // name would otherwise be leased twice.
  auto r = parse_record(text, node_id, diag);
  if (!r) {
    s.unreadable.push_back(std::move(node_id));
    return r.error();
  }
  s.nodes.push_back({std::move(*r), std::move(etag)});
  return {};
}

}  // namespace ferry::agent::pool
