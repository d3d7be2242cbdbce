#pragma once
// Files to and from a node through exec channels (libssh 0.10's SFTP blocks, so it is not used).
//
// Upload: `head -c SIZE` writes the bytes into a temporary file beside the target; they are
// followed by one line with their SHA-256, which ferry computes as the bytes go out (one pass, bounded
// memory). The node hashes what it received and renames the file into place only if both agree; on any
// failure (short data, a checksum mismatch, a signal, a cut connection) a trap removes the temporary
// file, so the target path only ever holds a whole, verified file. Parent directories are created.
//
// Download: the node sends the file's SHA-256 and size, then the file; ferry streams it into a
// temporary file beside the target, hashing as it goes, and renames it into place only if size and hash
// agree. A failed download leaves nothing at the target path.
//
// The node needs a POSIX sh, GNU coreutils (head -c reads no further than its count) and sha256sum.
#include "net/node_link.hpp"
#include "net/ssh_session.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace ferry::net {

// Traced as "ssh:upload" (node, path, bytes, sha256). Fails with errc::transfer_failed (the node's
// reason in `diag`), or what exec fails with.
asio::awaitable<result<transfer_result>> upload(tracing::action& parent, ssh_session& session,
                                                std::span<const char> bytes, const std::string& remote_path,
                                                diagnostics& diag, unsigned mode = 0644);
asio::awaitable<result<transfer_result>> upload_file(tracing::action& parent, ssh_session& session,
                                                     const std::filesystem::path& local,
                                                     const std::string& remote_path, diagnostics& diag,
                                                     unsigned mode = 0644);

// Traced as "ssh:download" (node, path, bytes, sha256).
asio::awaitable<result<transfer_result>> download_file(tracing::action& parent, ssh_session& session,
                                                       const std::string& remote_path,
                                                       const std::filesystem::path& local, diagnostics& diag);

// The remote side of an upload of `size` bytes: its stdin is the bytes, then their SHA-256 in hex and a
// newline. Exposed for tests that send it something else.
std::string upload_command(const std::string& remote_path, std::uint64_t size, unsigned mode);

}  // namespace ferry::net
