// The connection pool of net::http_client, seen from the network: ferry's S3 client in-process, moto
// behind the fault proxy, whose counter of accepted TCP connections tells how many connections ferry
// opened. moto runs with keep-alive (moto_options::keep_alive): moto_server itself closes every
// connection after one response, so no client could ever reuse one.
#include "config/loader.hpp"
#include "net/cancellation.hpp"
#include "net/error.hpp"
#include "net/run_all.hpp"
#include "net/s3_session.hpp"
#include "tracing/action_types.hpp"
#include "tracing/sink.hpp"

#include "support/fault_proxy.hpp"
#include "support/moto.hpp"
#include "support/run_to_end.hpp"
#include "support/settings.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_root.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <optional>
#include <thread>

namespace ferry::net {
namespace {

using namespace std::chrono_literals;
using test::temp_dir;

struct tally {
  int ok = 0;
  std::vector<std::string> failures;
};

// PutObject then HeadObject of a small object of its own; counts the pairs that came back right.
asio::awaitable<void> put_and_head(s3_client& s3, tracing::action& parent, std::string key, tally& t) {
  diagnostics diag;
  const std::string body = "the object called " + key;
  auto put = co_await s3.put_object(parent, "pool", key, std::span<const char>(body), diag);
  if (put) {
    auto info = co_await s3.head_object(parent, "pool", key, diag);
    if (info && info->size == body.size()) {
      ++t.ok;
      co_return;
    }
  }
  t.failures.push_back(key + ": " + diag.message);
}

asio::awaitable<void> one_after_another(s3_client& s3, tracing::action& parent, int pairs, tally& t) {
  co_await accept_cancellation();
  for (int i = 0; i < pairs; ++i) co_await put_and_head(s3, parent, "sequential-" + std::to_string(i), t);
}

asio::awaitable<void> all_at_once(s3_client& s3, tracing::action& parent, int pairs, tally& t) {
  co_await accept_cancellation();
  std::vector<asio::awaitable<void>> tasks;
  for (int i = 0; i < pairs; ++i) tasks.push_back(put_and_head(s3, parent, "concurrent-" + std::to_string(i), t));
  co_await run_all(std::move(tasks));
}

asio::awaitable<error_code> put(s3_client& s3, tracing::action& parent, std::string key, diagnostics& diag) {
  co_await accept_cancellation();
  const std::string body = "the object called " + key;
  auto etag = co_await s3.put_object(parent, "pool", key, std::span<const char>(body), diag);
  co_return etag ? error_code{} : etag.error();
}

asio::awaitable<error_code> head(s3_client& s3, tracing::action& parent, std::string key, diagnostics& diag) {
  co_await accept_cancellation();
  auto info = co_await s3.head_object(parent, "pool", key, diag);
  co_return info ? error_code{} : info.error();
}

class http_pool : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    moto_ = new test::moto_server({.keep_alive = true});
    moto_->make_bucket("pool");
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }

  // ferry's defaults, pointed at `server` through the proxy.
  config::settings settings() const {
    auto s = test::default_settings(dir.path());
    s.storage.endpoint = proxy->endpoint();
    s.net.retry.base_delay = 1ms;
    return s;
  }

  s3_client& client(const config::settings& s) {
    std::map<std::string, std::string, std::less<>> vars;
    for (const auto& [name, value] : server->environment()) vars[name] = value;
    diagnostics diag;
    auto opened = open_s3_session(io.get_executor(), cpu, s, map_environment(vars), diag);
    if (!opened) throw std::runtime_error(diag.message);
    session = std::move(*opened);
    return *session->s3;
  }

  // Puts the proxy in front of another server than the suite's.
  void serve_from(test::moto_server& other) {
    server = &other;
    proxy.emplace("127.0.0.1", other.port());
  }

  template <class T>
  T run(asio::awaitable<T> work) {
    return test::run_to_end(io, std::move(work));
  }

  tracing::action& root() { return trace.root(); }

  // The end messages of the S3 request attempts traced so far: one per attempt.
  std::vector<boost::json::object> attempts() {
    std::vector<boost::json::object> ends;
    for (auto& message : trace.messages_of(action_types::s3::request))
      if (message.at("action_status").as_string() != "started") ends.push_back(std::move(message));
    return ends;
  }

  static test::moto_server* moto_;
  temp_dir dir;
  test::moto_server* server = moto_;
  std::optional<test::fault_proxy> proxy{std::in_place, "127.0.0.1", moto_->port()};
  asio::io_context io;
  cpu_pool cpu{1};
  std::optional<s3_session> session;
  test::trace_root trace{dir / "trace.jsonl", "test:http_pool"};
};

test::moto_server* http_pool::moto_ = nullptr;

TEST_F(http_pool, sequential_requests_reuse_one_keep_alive_connection) {
  auto& s3 = client(settings());
  tally t;
  run(one_after_another(s3, root(), 10, t));  // 20 requests
  EXPECT_EQ(t.ok, 10) << ::testing::PrintToString(t.failures);
  EXPECT_EQ(proxy->connections_accepted(), 1u);
}

TEST_F(http_pool, concurrent_requests_stay_within_the_connection_limit) {
  auto s = settings();
  s.net.max_connections_per_host = 4;
  auto& s3 = client(s);
  // A little delay keeps every request in flight long enough for all 32 to want a connection at once.
  proxy->set_delay(5ms);
  tally t;
  run(all_at_once(s3, root(), 32, t));
  EXPECT_EQ(t.ok, 32) << ::testing::PrintToString(t.failures);
  EXPECT_LE(proxy->connections_accepted(), 4u);
  EXPECT_GE(proxy->connections_accepted(), 2u) << "the requests did not overlap: the test shows nothing";
}

TEST_F(http_pool, a_connection_the_server_closed_while_idle_is_replaced_without_a_retry) {
  // A server of its own, which closes a connection that has been idle for a second.
  test::moto_server closing({.keep_alive = true, .idle_close = 1s});
  closing.make_bucket("pool");
  serve_from(closing);
  auto& s3 = client(settings());
  diagnostics diag;
  const auto put_ec = run(put(s3, root(), "idle", diag));
  ASSERT_FALSE(put_ec) << put_ec.message() << ": " << diag.message;
  ASSERT_EQ(proxy->connections_accepted(), 1u);
  const auto before = attempts().size();

  for (int i = 0; i < 600 && closing.log().find("Request timed out") == std::string::npos; ++i)
    std::this_thread::sleep_for(50ms);
  ASSERT_NE(closing.log().find("Request timed out"), std::string::npos) << "the server never closed the connection";

  const auto ec = run(head(s3, root(), "idle", diag));
  ASSERT_FALSE(ec) << ec.message() << ": " << diag.message;
  EXPECT_EQ(proxy->connections_accepted(), 2u) << "the request should have gone out on a new connection";
  const auto after = attempts();
  ASSERT_EQ(after.size(), before + 1) << "the stale connection must not cost an attempt";
  EXPECT_EQ(after.back().at("action_status").as_string(), "succeeded");
}

TEST_F(http_pool, a_response_slower_than_the_read_timeout_fails_with_timeout_and_is_retried) {
  auto s = settings();
  s.net.read_timeout = 100ms;
  s.net.retry.max_attempts = 3;
  auto& s3 = client(s);
  proxy->set_delay(2s);  // per chunk: the response cannot arrive within the read timeout
  diagnostics diag;
  const auto ec = run(head(s3, root(), "anything", diag));
  EXPECT_EQ(ec, errc::timeout) << ec.message() << ": " << diag.message;
  const auto ends = attempts();
  ASSERT_EQ(ends.size(), 3u);
  // Each attempt failed the same way; the trace names the code as category:value.
  const auto timeout = make_error_code(errc::timeout);
  const auto expected = std::string(timeout.category().name()) + ":" + std::to_string(timeout.value());
  for (const auto& end : ends) {
    EXPECT_EQ(end.at("action_status").as_string(), "failed");
    EXPECT_EQ(end.at("exception").as_string(), expected) << end;
  }
}

}  // namespace
}  // namespace ferry::net
