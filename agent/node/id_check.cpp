#include "agent/node/id_check.hpp"

namespace ferry::agent::node {

result<void> id_check::begin(const zip_entry& entry, diagnostics& diag) {
  if (auto r = next_.begin(entry, diag); !r) return r;
  name_ = entry.name;
  mode_ = entry.mode;
  content_.reset();
  length_ = 0;
  return {};
}

result<void> id_check::data(std::string_view bytes, diagnostics& diag) {
  content_.update(bytes);
  length_ += bytes.size();
  return next_.data(bytes, diag);
}

result<void> id_check::end(diagnostics& diag) {
  if (auto r = next_.end(diag); !r) return r;
  if (piece_offset_) {
    id_.add_piece(name_, mode_, *piece_offset_, length_, content_.finish());
  } else {
    id_.add(name_, mode_, content_.finish());
  }
  return {};
}

std::string id_check::finish_hex() { return net::to_hex(id_.finish()); }

}  // namespace ferry::agent::node
