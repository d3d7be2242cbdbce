#pragma once
// Whole-object transfers on top of the S3 client: multipart uploads fed by a producer with bounded
// memory, files up and down. A download lands in a temporary file beside its destination and is
// renamed into place only when whole; a failed or cancelled multipart upload is aborted, so storage
// never keeps a half-written object or orphaned parts.
#include "net/s3_client.hpp"

#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

namespace ferry::net {

// The next part's bytes, or nullopt after the last part. Called again only after the previous call
// finished; the multipart upload keeps at most parts_in_flight parts in memory plus the one being made.
using part_source = std::function<asio::awaitable<result<std::optional<std::vector<char>>>>(diagnostics& diag)>;

// Bytes moved so far, readable from another coroutine (a progress bar) while a transfer runs.
struct transfer_progress {
  std::uint64_t done = 0;
  std::uint64_t total = 0;  // 0 until known
};

struct upload_result {
  std::string etag;
  std::uint64_t bytes = 0;
  int parts = 0;  // 0 for a single PUT
};

asio::awaitable<result<upload_result>> upload_multipart(s3_client& s3, tracing::action& parent,
                                                        const std::string& bucket, const std::string& key,
                                                        part_source next, diagnostics& diag,
                                                        transfer_progress* progress = nullptr);

// A single PUT up to s3.part_size, a multipart upload above it.
asio::awaitable<result<upload_result>> upload_file(s3_client& s3, tracing::action& parent,
                                                   const std::filesystem::path& file, const std::string& bucket,
                                                   const std::string& key, diagnostics& diag,
                                                   transfer_progress* progress = nullptr);

// Streams the object to `file` via a temporary file in the same directory, resuming with a Range
// request (pinned to the object's ETag) when a retry follows a cut connection.
asio::awaitable<result<object_info>> download_file(s3_client& s3, tracing::action& parent, const std::string& bucket,
                                                   const std::string& key, const std::filesystem::path& file,
                                                   diagnostics& diag, transfer_progress* progress = nullptr);

}  // namespace ferry::net
