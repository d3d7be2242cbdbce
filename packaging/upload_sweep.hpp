#pragma once
// Multipart uploads that never ended (a crash, a kill -9, storage gone mid-upload) keep their parts in
// the bucket, and cost, until someone aborts them. Ferry's own are uploads of layer zips under its prefix
// (`<prefix>layers/...zip`); those started longer ago than an age are stale. Younger ones may belong to a
// pack running right now elsewhere and are left alone. Each pack sweeps them (packaging.stale_upload_age),
// and `ferry storage gc` lists them and aborts them with --delete (its --older-than).
#include "net/s3_client.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry::packaging {

struct stale_uploads {
  std::size_t found = 0;                     // ferry's uploads under the prefix
  std::vector<net::multipart_upload> stale;  // of those, the ones started at least `max_age` ago
};

// Lists them; `now` is unix seconds (the caller's clock, for tests). An upload whose start cannot be read
// is not known to be old.
boost::asio::awaitable<result<stale_uploads>> find_stale_uploads(tracing::action& act, net::s3_client& s3,
                                                                 const std::string& bucket,
                                                                 const std::string& prefix,
                                                                 std::chrono::seconds max_age, std::int64_t now,
                                                                 diagnostics& diag);

// Aborts each; one that cannot be aborted is logged as `ferry:packaging:sweep_failed` and skipped.
// Returns how many were aborted.
boost::asio::awaitable<std::size_t> abort_uploads(tracing::action& act, net::s3_client& s3, const std::string& bucket,
                                                  const std::vector<net::multipart_upload>& uploads);

struct sweep_report {
  std::size_t found = 0;    // ferry's uploads under the prefix
  std::size_t aborted = 0;  // of those, old enough and aborted
};

// Both, traced as `ferry:packaging:sweep`.
boost::asio::awaitable<result<sweep_report>> sweep_stale_uploads(tracing::action& parent, net::s3_client& s3,
                                                                 const std::string& bucket,
                                                                 const std::string& prefix,
                                                                 std::chrono::seconds max_age, std::int64_t now,
                                                                 diagnostics& diag);

}  // namespace ferry::packaging
