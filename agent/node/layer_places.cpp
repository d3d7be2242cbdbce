#include "agent/node/layer_places.hpp"

#include "agent/node/tenant_account.hpp"

namespace ferry::agent::node {

void layer_places::note(std::string_view id, std::string_view name) {
  if (own_ && name == "workspace") own_ids_.emplace(id);
}

result<void> layer_places::commit(std::string_view id, const std::string& temp, std::uint64_t disk_bytes,
                                  diagnostics& diag) const {
  if (own(id) && user_)
    if (auto given = give_tree(temp, *user_, diag); !given) return given;
  return of(id).commit(id, temp, disk_bytes, diag);
}

std::vector<evicted_layer> layer_places::evict(std::uint64_t cap, const std::set<std::string>& keep) const {
  auto out = shared_.evict(cap, keep);
  if (own_) {
    auto more = own_->evict(cap, keep);
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

}  // namespace ferry::agent::node
