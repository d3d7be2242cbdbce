#include "packaging/upload_sweep.hpp"

#include "net/iso_time.hpp"
#include "packaging/layer.hpp"
#include "tracing/action_types.hpp"

namespace ferry::packaging {

namespace asio = boost::asio;

asio::awaitable<result<sweep_report>> sweep_stale_uploads(tracing::action& parent, net::s3_client& s3,
                                                          const std::string& bucket, const std::string& prefix,
                                                          std::chrono::seconds max_age, std::int64_t now,
                                                          diagnostics& diag) {
  auto act = parent.child(action_types::packaging::sweep, {{"prefix", prefix}, {"max_age_s", max_age.count()}});
  const auto layers = key_prefix(prefix) + "layers/";
  auto uploads = co_await s3.list_multipart_uploads(act, bucket, layers, diag);
  if (!uploads) {
    act.fail(uploads.error(), diag);
    co_return uploads.error();
  }
  sweep_report report;
  for (const auto& u : *uploads) {
    if (!u.key.starts_with(layers) || !u.key.ends_with(".zip")) continue;
    ++report.found;
    const auto started = net::unix_seconds_of(u.initiated);
    // An upload whose start cannot be read is not known to be old.
    if (!started || now - *started < max_age.count()) continue;
    diagnostics d;
    if (auto aborted = co_await s3.abort_multipart_upload(act, bucket, u.key, u.upload_id, d); aborted) {
      ++report.aborted;
    } else {
      act.log(action_types::packaging::sweep_failed, {{"key", u.key}, {"reason", d.message}});
    }
  }
  act.succeed({{"found", report.found}, {"aborted", report.aborted}});
  co_return report;
}

}  // namespace ferry::packaging
