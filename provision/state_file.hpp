#pragma once
// Small state files (the node registry, a local node's record) read whole and replaced whole: a new
// version is written to a temporary file beside the old one, flushed, and renamed over it, so a reader
// (another ferry command, without any lock) sees the old version or the new one, never a torn mix, and a
// crash mid-write leaves the old version in place.
#include "tracing/diagnostics.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::provision {

// The file's bytes; nullopt with `ec` empty when it does not exist, with `ec` set when it cannot be read.
std::optional<std::string> read_state_file(const std::filesystem::path& file, error_code& ec);

// Replaces `file` (mode 0600) with `text`, atomically. Fails with the system's error, naming the file.
result<void> write_state_file(const std::filesystem::path& file, std::string_view text, diagnostics& diag);

}  // namespace ferry::provision
