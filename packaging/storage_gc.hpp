#pragma once
// What `ferry storage gc` removes under a prefix, and the removal.
//
// A manifest is live while storage wrote it less than `max_age` ago; every zip a live manifest names is
// kept, with its sidecar. What goes:
//   - manifests that are not live, first: a pack that finds its manifest skips every upload, so no
//     manifest may outlive a zip it names;
//   - then the zips (and their sidecars) under `<prefix>layers/` that no live manifest names and that are
//     themselves older than `max_age`: a pack running now stores its zips before its manifest;
//   - the arguments the Python API stored under `<prefix>blobs/` (agent/api/api_session.hpp) that are older
//     than `max_age`: a session stores each before its tasks name it, and finds it there if it is;
//   - multipart uploads of layer zips begun at least `max_age` ago (packaging/upload_sweep.hpp): aborted.
// Objects of other shapes under the prefix are not ferry's to judge and stay.
#include "net/s3_client.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry::packaging {

struct gc_plan {
  std::vector<net::s3_object> manifests;  // to remove
  std::vector<net::s3_object> zips;       // to remove, each followed by its sidecar when it has one; old blobs

  std::vector<net::multipart_upload> uploads;  // to abort
  std::size_t live_manifests = 0;
  std::size_t kept_zips = 0;
  std::uint64_t bytes = 0;  // what removing them frees
};

// Traced as `ferry:storage:gc_plan`. `now` is unix seconds (the caller's clock, for tests). A live manifest
// that cannot be read is an error: what it names is unknown, so nothing could be removed safely.
boost::asio::awaitable<result<gc_plan>> plan_gc(tracing::action& parent, net::s3_client& s3, const std::string& bucket,
                                                const std::string& prefix, std::chrono::seconds max_age,
                                                std::int64_t now, diagnostics& diag);

// Removes the plan's objects, manifests first, then aborts its uploads; an upload that could not be
// aborted is an error (after the others).
boost::asio::awaitable<result<void>> apply_gc(tracing::action& parent, net::s3_client& s3, const std::string& bucket,
                                              const gc_plan& plan, diagnostics& diag);

}  // namespace ferry::packaging
