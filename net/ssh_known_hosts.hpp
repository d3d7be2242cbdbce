#pragma once
// ferry's own known_hosts file (<config dir>/known_hosts), apart from ~/.ssh/known_hosts: one line per
// node, "<node id> <key type> <base64 key>". Keys are filed by node id rather than host:port because
// local nodes reuse addresses and ports: a new node on an old address is a new node, and an old node
// answering with another key is an attack or a rebuilt node, which a person has to look at.
//
// Trust on first use: a node id the file does not name is recorded with the key it presented. A node
// whose key differs from the recorded one is refused, naming the node, the file and both fingerprints.
#include "net/ssh_keys.hpp"
#include "tracing/diagnostics.hpp"

#include <filesystem>
#include <optional>
#include <string_view>

namespace ferry::net {

enum class host_key_status {
  known,    // the node presented the key on record
  trusted,  // the node was new: its key is on record now
};

// The key on record for `node`, if any.
result<std::optional<public_key_info>> recorded_host_key(const std::filesystem::path& file, std::string_view node,
                                                        diagnostics& diag);

// Checks `presented` against the record for `node`, recording it when the node is new. The record is
// appended with one write(2) to a file opened O_APPEND (mode 0600), so concurrent ferry processes never
// lose each other's lines. Fails with errc::host_key_changed or errc::known_hosts_error.
result<host_key_status> check_host_key(const std::filesystem::path& file, std::string_view node,
                                       const public_key_info& presented, diagnostics& diag);

// Drops the record of `node` (a node that was destroyed, whose id may come back with a new key).
error_code forget_host_key(const std::filesystem::path& file, std::string_view node, diagnostics& diag);

}  // namespace ferry::net
