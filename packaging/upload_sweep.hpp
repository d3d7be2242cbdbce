#pragma once
// Multipart uploads that never ended (a crash, a kill -9, storage gone mid-upload) keep their parts in
// the bucket, and cost, until someone aborts them. Each pack sweeps ferry's own: uploads of layer zips
// under its prefix (`<prefix>layers/...zip`) started longer ago than packaging.stale_upload_age. Younger
// ones may belong to a pack running right now elsewhere and are left alone.
#include "net/s3_client.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace ferry::packaging {

struct sweep_report {
  std::size_t found = 0;    // ferry's uploads under the prefix
  std::size_t aborted = 0;  // of those, old enough and aborted
};

// Traced as `ferry:packaging:sweep`. `now` is unix seconds (the caller's clock, for tests).
boost::asio::awaitable<result<sweep_report>> sweep_stale_uploads(tracing::action& parent, net::s3_client& s3,
                                                                 const std::string& bucket,
                                                                 const std::string& prefix,
                                                                 std::chrono::seconds max_age, std::int64_t now,
                                                                 diagnostics& diag);

}  // namespace ferry::packaging
