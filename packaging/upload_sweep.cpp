#include "packaging/upload_sweep.hpp"

#include "net/iso_time.hpp"
#include "packaging/layer.hpp"
#include "tracing/action_types.hpp"

namespace ferry::packaging {

namespace asio = boost::asio;

asio::awaitable<result<stale_uploads>> find_stale_uploads(tracing::action& act, net::s3_client& s3,
                                                          const std::string& bucket, const std::string& prefix,
                                                          std::chrono::seconds max_age, std::int64_t now,
                                                          diagnostics& diag) {
  const auto layers = key_prefix(prefix) + "layers/";
  auto uploads = co_await s3.list_multipart_uploads(act, bucket, layers, diag);
  if (!uploads) co_return uploads.error();
  stale_uploads out;
  for (auto& u : *uploads) {
    // Either codec's zips (".zip", ".zstd.zip"): a deflate pack sweeps a zstd pack's leftovers too.
    if (!u.key.starts_with(layers) || !codec_of_key(u.key)) continue;
    ++out.found;
    const auto started = net::unix_seconds_of(u.initiated);
    if (!started || now - *started < max_age.count()) continue;
    out.stale.push_back(std::move(u));
  }
  co_return out;
}

asio::awaitable<std::size_t> abort_uploads(tracing::action& act, net::s3_client& s3, const std::string& bucket,
                                           const std::vector<net::multipart_upload>& uploads) {
  std::size_t aborted = 0;
  for (const auto& u : uploads) {
    diagnostics d;
    if (auto done = co_await s3.abort_multipart_upload(act, bucket, u.key, u.upload_id, d); done) {
      ++aborted;
    } else {
      act.log(action_types::packaging::sweep_failed, {{"key", u.key}, {"reason", d.message}});
    }
  }
  co_return aborted;
}

asio::awaitable<result<sweep_report>> sweep_stale_uploads(tracing::action& parent, net::s3_client& s3,
                                                          const std::string& bucket, const std::string& prefix,
                                                          std::chrono::seconds max_age, std::int64_t now,
                                                          diagnostics& diag) {
  auto act = parent.child(action_types::packaging::sweep, {{"prefix", prefix}, {"max_age_s", max_age.count()}});
  auto found = co_await find_stale_uploads(act, s3, bucket, prefix, max_age, now, diag);
  if (!found) {
    act.fail(found.error(), diag);
    co_return found.error();
  }
  sweep_report report;
  report.found = found->found;
  report.aborted = co_await abort_uploads(act, s3, bucket, found->stale);
  act.succeed({{"found", report.found}, {"aborted", report.aborted}});
  co_return report;
}

}  // namespace ferry::packaging
