#pragma once
// The pool as one agent read it: every node's record with the ETag it was read at. Decisions
// (lease_core.hpp) are made against a snapshot and written back conditionally on those ETags, so a
// decision made on a stale snapshot fails its write instead of overwriting a newer record.
#include "agent/pool/pool_record.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent::pool {

struct pool_entry {
  pool_record record;
  std::string etag;  // as storage gave it, quotes and all: it goes back verbatim in If-Match
};

struct pool_snapshot {
  std::vector<pool_entry> nodes;
  // Objects under nodes/ that could not be parsed (or name another node). They are nobody's to lease,
  // but they still exist: they count toward the pool's size and their names are not given to new nodes.
  std::vector<std::string> unreadable;

  // The entry of that node, or null.
  const pool_entry* find(std::string_view node_id) const;
  // Every node the pool holds, readable or not.
  std::size_t size() const { return nodes.size() + unreadable.size(); }
  // Whether some object, readable or not, has that name.
  bool has_name(std::string_view node_id) const;
};

// Adds the object nodes/<node_id>.json read with `etag`: its record, or its name to `unreadable` with
// the reason in `diag` (errc::bad_pool_record; the snapshot is usable either way).
result<void> add_object(pool_snapshot& s, std::string node_id, std::string etag, std::string_view text,
                        diagnostics& diag);

}  // namespace ferry::agent::pool
