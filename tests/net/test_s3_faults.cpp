// A flaky network between ferry and moto_server (the fault proxy cuts connections and adds delay):
// transfers complete by retrying, an object is never visible with wrong bytes, and a multipart upload
// that fails or is interrupted leaves no parts behind.
#include "net/cancellation.hpp"
#include "net/s3_session.hpp"
#include "net/s3_transfer.hpp"
#include "support/eliot.hpp"
#include "support/fault_proxy.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/random_bytes.hpp"
#include "support/settings.hpp"
#include "support/temp_dir.hpp"
#include "tracing/sink.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <thread>

namespace ferry {
namespace {

using test::temp_dir;
using test::write_random_file;
using namespace net;
namespace asio = boost::asio;

class s3_faults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    moto_ = new test::moto_server({.auth = true});
    moto_->make_bucket("faults");
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }

  // ferry talks to moto through the proxy; the aws CLI, the independent judge, talks to moto directly.
  test::process_options through_proxy() const {
    auto o = moto_->process_env();
    o.env["AWS_ENDPOINT_URL"] = proxy.endpoint();
    o.env["HOME"] = dir.path().string();
    o.env["XDG_STATE_HOME"] = (dir / "state").string();
    o.env["FERRY_NET_RETRY_BASE_DELAY"] = "10ms";
    o.env["FERRY_S3_MULTIPART_THRESHOLD"] = "8MiB";  // the 20 MiB files go up in parts
    return o;
  }

  std::string stored(const std::string& key) const {
    const auto out = dir / ("stored-" + std::to_string(std::hash<std::string>{}(key)));
    const auto r = moto_->aws({"s3", "cp", "s3://faults/" + key, out.string()});
    return r.exit_code == 0 ? test::read_file(out) : std::string("<missing>");
  }

  bool no_multipart_uploads_left() const {
    const auto r = moto_->aws({"s3api", "list-multipart-uploads", "--bucket", "faults"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.find("UploadId") == std::string::npos;
  }

  static test::moto_server* moto_;
  temp_dir dir;
  test::fault_proxy proxy{"127.0.0.1", moto_->port()};
};

test::moto_server* s3_faults::moto_ = nullptr;

TEST_F(s3_faults, a_multipart_upload_completes_when_connections_are_cut) {
  const auto file = dir / "up";
  write_random_file(file, 20u << 20, 1);
  proxy.cut_upload_after(1u << 20);
  proxy.set_faulty_connections(3);
  const auto trace = dir / "t.jsonl";
  const auto r = test::run_ferry({"storage", "cp", file.string(), "s3://faults/cut-up", "--trace", trace.string()},
                                 through_proxy());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(proxy.connections_cut(), 1u);
  EXPECT_EQ(stored("cut-up"), test::read_file(file));
  EXPECT_TRUE(test::eliot_parse({trace})[0].at("complete").as_bool());
  EXPECT_NE(test::read_file(trace).find("\"retry_in_ms\""), std::string::npos) << "the retry must be traced";
  EXPECT_TRUE(no_multipart_uploads_left());
}

TEST_F(s3_faults, a_single_put_completes_when_its_connection_is_cut) {
  const auto file = dir / "small";
  write_random_file(file, 3u << 20, 2);
  proxy.cut_upload_after(512u << 10);
  proxy.set_faulty_connections(1);
  const auto r = test::run_ferry({"storage", "cp", file.string(), "s3://faults/cut-put"}, through_proxy());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(proxy.connections_cut(), 1u);
  EXPECT_EQ(stored("cut-put"), test::read_file(file));
}

TEST_F(s3_faults, a_download_resumes_after_a_cut_and_lands_whole) {
  const auto file = dir / "down-source";
  write_random_file(file, 12u << 20, 3);
  ASSERT_EQ(moto_->aws({"s3", "cp", file.string(), "s3://faults/cut-down"}).exit_code, 0);
  proxy.cut_download_after(3u << 20);
  proxy.set_faulty_connections(2);
  const auto out = dir / "down";
  const auto r = test::run_ferry({"storage", "cp", "s3://faults/cut-down", out.string()}, through_proxy());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(proxy.connections_cut(), 2u);
  EXPECT_EQ(test::read_file(out), test::read_file(file));
  // A resumed download asks only for the rest: far fewer than three whole copies crossed the proxy.
  EXPECT_LT(proxy.bytes_downloaded(), 2 * (12u << 20));
}

TEST_F(s3_faults, added_delay_slows_but_does_not_break_transfers) {
  const auto file = dir / "slow";
  write_random_file(file, 6u << 20, 4);
  proxy.set_delay(std::chrono::milliseconds(2));
  ASSERT_EQ(test::run_ferry({"storage", "cp", file.string(), "s3://faults/slow"}, through_proxy()).exit_code, 0);
  ASSERT_EQ(test::run_ferry({"storage", "cp", "s3://faults/slow", (dir / "slow-back").string()}, through_proxy())
                .exit_code,
            0);
  EXPECT_EQ(test::read_file(dir / "slow-back"), test::read_file(file));
  EXPECT_EQ(stored("slow"), test::read_file(file));
}

TEST_F(s3_faults, a_put_cut_for_good_fails_and_leaves_no_object) {
  const auto file = dir / "never";
  write_random_file(file, 2u << 20, 5);
  proxy.cut_upload_after(256u << 10);
  auto o = through_proxy();
  o.env["FERRY_NET_RETRY_MAX_ATTEMPTS"] = "3";
  const auto r = test::run_ferry({"storage", "cp", file.string(), "s3://faults/never"}, o);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ferry: error:"), std::string::npos) << r.err;
  EXPECT_EQ(proxy.connections_cut(), 3u);
  EXPECT_EQ(stored("never"), "<missing>");
}

TEST_F(s3_faults, a_failing_multipart_upload_is_aborted) {
  const auto file = dir / "doomed";
  write_random_file(file, 20u << 20, 6);
  proxy.cut_upload_after(2u << 20);  // every connection: no part ever gets through
  auto o = through_proxy();
  o.env["FERRY_NET_RETRY_MAX_ATTEMPTS"] = "2";
  const auto r = test::run_ferry({"storage", "cp", file.string(), "s3://faults/doomed"}, o);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(stored("doomed"), "<missing>");
  EXPECT_TRUE(no_multipart_uploads_left());
}

TEST_F(s3_faults, a_multipart_upload_whose_every_worker_fails_ends_while_a_part_waits_to_be_sent) {
  // In process, with parts that are ready at once and one part in flight: when the only worker gives up,
  // the producer is already waiting in the channel's send with the next part. That wait once lasted for
  // ever, with nothing armed to end it.
  proxy.cut_upload_after(64u << 10);
  auto settings = test::default_settings(dir.path());
  settings.s3.part_size.bytes = 5 << 20;
  settings.s3.parts_in_flight = 1;
  settings.net.retry.max_attempts = 1;
  std::map<std::string, std::string, std::less<>> vars;
  for (const auto& [name, value] : moto_->environment()) vars[name] = value;
  vars["AWS_ENDPOINT_URL"] = proxy.endpoint();
  asio::io_context io;
  cpu_pool cpu(1);
  diagnostics diag;
  auto session = open_s3_session(io.get_executor(), cpu, settings, map_environment(vars), diag);
  ASSERT_TRUE(session) << diag.message;
  int made = 0;
  const part_source parts = [&made](diagnostics&) -> asio::awaitable<result<std::optional<std::vector<char>>>> {
    if (made == 4) co_return std::optional<std::vector<char>>{};
    ++made;
    co_return std::optional<std::vector<char>>(std::vector<char>(5 << 20, 'p'));
  };
  auto out = tracing::sink::discard();
  auto root = tracing::action::start_task(*out, "test:upload");
  // Named: upload_multipart keeps references to its strings, and runs long after this statement.
  const std::string bucket = "faults";
  const std::string key = "stuck";
  auto done = asio::co_spawn(io, upload_multipart(*session->s3, root, bucket, key, parts, diag), asio::use_future);
  io.run_for(std::chrono::seconds(60));
  ASSERT_EQ(done.wait_for(std::chrono::seconds(0)), std::future_status::ready)
      << "the upload still waited a minute after its only worker failed";
  EXPECT_FALSE(done.get());
  EXPECT_LT(made, 4);
  EXPECT_EQ(stored("stuck"), "<missing>");
  EXPECT_TRUE(no_multipart_uploads_left());
}

struct cancelled_upload {
  result<upload_result> r = error_code{};
  bool caller_still_cancelled = false;
};

// The caller of a cancelled upload: what it got, and whether it still knows it was cancelled afterwards.
asio::awaitable<void> upload_then_ask(s3_client& s3, tracing::action& root, const std::string& bucket,
                                      const std::string& key, const part_source& parts, diagnostics& diag,
                                      cancelled_upload& out) {
  co_await accept_cancellation();
  out.r = co_await upload_multipart(s3, root, bucket, key, parts, diag);
  out.caller_still_cancelled = co_await cancelled();
}

TEST_F(s3_faults, a_multipart_upload_cancelled_while_parts_go_is_aborted_and_its_caller_still_hears_it) {
  // The third part never comes: the caller is cancelled while its read waits and two parts are on the way.
  auto settings = test::default_settings(dir.path());
  settings.s3.part_size.bytes = 5 << 20;
  std::map<std::string, std::string, std::less<>> vars;
  for (const auto& [name, value] : moto_->environment()) vars[name] = value;
  asio::io_context io;
  cpu_pool cpu(1);
  diagnostics diag;
  auto session = open_s3_session(io.get_executor(), cpu, settings, map_environment(vars), diag);
  ASSERT_TRUE(session) << diag.message;
  asio::cancellation_signal stop;
  int made = 0;
  const part_source parts = [&made, &stop](diagnostics&) -> asio::awaitable<result<std::optional<std::vector<char>>>> {
    if (++made <= 2) co_return std::optional<std::vector<char>>(std::vector<char>(5 << 20, 'p'));
    const auto io_now = co_await asio::this_coro::executor;
    // Posted, like a signal handler: the cancellation comes while every coroutine waits.
    asio::post(io_now, [&stop] { stop.emit(asio::cancellation_type::total); });
    asio::steady_timer never(io_now, std::chrono::minutes(1));
    error_code ec;
    co_await never.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return ec ? ec : error_code(asio::error::timed_out);
  };
  auto out = tracing::sink::discard();
  auto root = tracing::action::start_task(*out, "test:upload");
  const std::string bucket = "faults";
  const std::string key = "cancelled";
  cancelled_upload got;
  auto done = asio::co_spawn(io, upload_then_ask(*session->s3, root, bucket, key, parts, diag, got),
                             asio::bind_cancellation_slot(stop.slot(), asio::use_future));
  io.run_for(std::chrono::seconds(30));
  ASSERT_EQ(done.wait_for(std::chrono::seconds(0)), std::future_status::ready) << "the cancelled upload never ended";
  done.get();
  ASSERT_FALSE(got.r);
  EXPECT_EQ(got.r.error(), asio::error::operation_aborted);
  EXPECT_TRUE(got.caller_still_cancelled) << "the upload reset its caller's cancellation state";
  EXPECT_EQ(made, 3);
  EXPECT_EQ(stored("cancelled"), "<missing>");
  EXPECT_TRUE(no_multipart_uploads_left());
}

TEST_F(s3_faults, ctrl_c_during_a_multipart_upload_aborts_it_and_closes_the_trace) {
  const auto file = dir / "interrupted";
  write_random_file(file, 60u << 20, 7);
  proxy.set_delay(std::chrono::milliseconds(5));
  const auto trace = dir / "t.jsonl";
  auto child = test::spawn_ferry({"storage", "cp", file.string(), "s3://faults/interrupted", "--trace", trace.string()},
                                 through_proxy());
  for (int i = 0; i < 600 && proxy.bytes_uploaded() < (4u << 20); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(proxy.bytes_uploaded(), 4u << 20) << "the upload never got going";
  child->signal(SIGINT);
  const auto r = child->wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  proxy.clear_faults();
  EXPECT_TRUE(no_multipart_uploads_left());
  EXPECT_EQ(stored("interrupted"), "<missing>");
  const auto tasks = test::eliot_parse({trace});
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].at("complete").as_bool());
  EXPECT_NE(test::read_file(trace).find("\"reason\":\"cancelled\""), std::string::npos);
}

}  // namespace
}  // namespace ferry
