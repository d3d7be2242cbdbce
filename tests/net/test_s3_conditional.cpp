// S3 conditional writes (If-None-Match: *, If-Match: "<etag>") from ferry's S3 client against a real
// moto_server with signature checking on: a write whose condition does not hold leaves the object as it
// was and fails once with errc::precondition_failed, and writers that read, change and write back with
// If-Match lose no update however they interleave. The aws CLI reads what ferry wrote.
#include "net/cancellation.hpp"
#include "net/error.hpp"
#include "net/run_all.hpp"
#include "net/s3_session.hpp"
#include "tracing/action_types.hpp"

#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/run_to_end.hpp"
#include "support/settings.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_root.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <sstream>

// A namespace of its own: the test binary is a unity build, and its neighbours have helpers called put and get.
namespace ferry::net::conditional_writes {
namespace {

using namespace std::chrono_literals;
using test::temp_dir;

constexpr std::string_view bucket = "pools";

// An object's bytes and the ETag of that version, or the error of reading it.
struct read_back {
  error_code ec;
  std::string bytes;
  std::string etag;
};

asio::awaitable<read_back> get(s3_client& s3, tracing::action& parent, std::string key) {
  read_back out;
  const body_sink collect = [&out](std::span<const char> chunk) {
    out.bytes.append(chunk.data(), chunk.size());
    return error_code{};
  };
  diagnostics diag;
  auto info = co_await s3.get_object(parent, std::string(bucket), key, collect, "", diag);
  if (!info) {
    out.ec = info.error();
    co_return out;
  }
  out.etag = info->etag;
  co_return out;
}

// A conditional PUT's outcome: the new ETag, or the error and its message.
struct put_outcome {
  error_code ec;
  std::string etag;
  std::string message;
};

asio::awaitable<put_outcome> put(s3_client& s3, tracing::action& parent, std::string key, std::string body,
                                 write_condition condition) {
  diagnostics diag;
  auto etag = co_await s3.put_object(parent, std::string(bucket), key, std::span<const char>(body),
                                     std::move(condition), diag);
  if (!etag) co_return put_outcome{etag.error(), {}, diag.message};
  co_return put_outcome{{}, *etag, {}};
}

struct storm_tally {
  int landed = 0;
  int refused = 0;  // precondition failures: another writer got in between a read and its write
  std::vector<std::string> failures;
};

// Appends `writes` lines "<name> <n>" to the object, one read-modify-write each, until each lands.
asio::awaitable<void> append_lines(s3_client& s3, tracing::action& parent, std::string key, std::string name,
                                   int writes, storm_tally& t) {
  co_await accept_cancellation();
  for (int n = 0; n < writes; ++n) {
    for (int tries = 0;; ++tries) {
      if (tries == 1000) {
        t.failures.push_back(name + ": no write landed in 1000 tries");
        co_return;
      }
      auto now = co_await get(s3, parent, key);
      if (now.ec) {
        t.failures.push_back(name + ": read: " + now.ec.message());
        co_return;
      }
      auto written = co_await put(s3, parent, key, now.bytes + fmt::format("{} {}\n", name, n),
                                  write_condition::if_match(now.etag));
      if (!written.ec) {
        ++t.landed;
        break;
      }
      if (written.ec != errc::precondition_failed) {
        t.failures.push_back(name + ": write: " + written.message);
        co_return;
      }
      ++t.refused;
    }
  }
}

class s3_conditional : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    moto_ = new test::moto_server({.auth = true, .serial = true});
    moto_->make_bucket(std::string(bucket));
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }

  // A session of its own, as another workstation would have.
  s3_session open_session() {
    auto s = test::default_settings(dir.path());
    s.net.retry.base_delay = 1ms;
    std::map<std::string, std::string, std::less<>> vars;
    for (const auto& [name, value] : moto_->environment()) vars[name] = value;
    diagnostics diag;
    auto opened = open_s3_session(io.get_executor(), cpu, s, map_environment(vars), diag);
    if (!opened) throw std::runtime_error(diag.message);
    return std::move(*opened);
  }

  s3_client& s3() {
    if (!session) session = open_session();
    return *session->s3;
  }

  template <class T>
  T run(asio::awaitable<T> work) {
    return test::run_to_end(io, std::move(work));
  }

  read_back get(const std::string& key) { return run(conditional_writes::get(s3(), trace.root(), key)); }
  put_outcome put(const std::string& key, std::string body, write_condition condition,
                  tracing::action* parent = nullptr) {
    return run(conditional_writes::put(s3(), parent ? *parent : trace.root(), key, std::move(body), std::move(condition)));
  }

  // How many S3 request attempts a trace file holds.
  static std::size_t attempts_in(test::trace_root& t) { return t.count(action_types::s3::request, "started"); }

  static test::moto_server* moto_;
  temp_dir dir;
  asio::io_context io;
  cpu_pool cpu{1};
  std::optional<s3_session> session;
  test::trace_root trace{dir / "trace.jsonl", "test:s3_conditional"};
};

test::moto_server* s3_conditional::moto_ = nullptr;

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

TEST_F(s3_conditional, create_only_writes_a_missing_key_and_refuses_an_existing_one) {
  const std::string key = "pools/team/create-only.json";
  const auto first = put(key, R"({"node":"a"})", write_condition::create_only());
  ASSERT_FALSE(first.ec) << first.message << moto_->log();
  EXPECT_FALSE(first.etag.empty());

  const auto second = put(key, R"({"node":"b"})", write_condition::create_only());
  EXPECT_EQ(second.ec, errc::precondition_failed) << second.message;
  EXPECT_TRUE(contains(second.message, "s3://pools/pools/team/create-only.json")) << second.message;
  EXPECT_TRUE(contains(second.message, "If-None-Match: *")) << second.message;

  const auto now = get(key);
  ASSERT_FALSE(now.ec);
  EXPECT_EQ(now.bytes, R"({"node":"a"})");
  EXPECT_EQ(now.etag, first.etag);
}

TEST_F(s3_conditional, if_match_replaces_the_version_read_and_refuses_a_stale_one) {
  const std::string key = "pools/team/if-match.json";
  const auto v1 = put(key, "one", write_condition::create_only());
  ASSERT_FALSE(v1.ec) << v1.message << moto_->log();
  const auto read = get(key);
  ASSERT_FALSE(read.ec);
  EXPECT_EQ(read.etag, v1.etag) << "GetObject gives the ETag the PUT returned";

  const auto v2 = put(key, "two", write_condition::if_match(read.etag));
  ASSERT_FALSE(v2.ec) << v2.message;
  EXPECT_NE(v2.etag, v1.etag);
  EXPECT_EQ(get(key).bytes, "two");

  const auto stale = put(key, "three", write_condition::if_match(v1.etag));
  EXPECT_EQ(stale.ec, errc::precondition_failed) << stale.message;
  EXPECT_TRUE(contains(stale.message, "If-Match: " + v1.etag)) << stale.message;
  EXPECT_TRUE(contains(stale.message, "pools/team/if-match.json")) << stale.message;
  const auto after = get(key);
  EXPECT_EQ(after.bytes, "two");
  EXPECT_EQ(after.etag, v2.etag);

  // An ETag given without S3's quotes means the same version.
  const auto bare = v2.etag.substr(1, v2.etag.size() - 2);
  const auto v3 = put(key, "three", write_condition::if_match(bare));
  ASSERT_FALSE(v3.ec) << v3.message;
  EXPECT_EQ(get(key).bytes, "three");
}

TEST_F(s3_conditional, a_failed_condition_is_tried_once) {
  const std::string key = "pools/team/once.json";
  ASSERT_FALSE(put(key, "here", write_condition::create_only()).ec);
  test::trace_root refused_trace{dir / "refused.jsonl", "test:refused"};
  const auto refused = put(key, "again", write_condition::create_only(), &refused_trace.root());
  ASSERT_EQ(refused.ec, errc::precondition_failed) << refused.message;
  ASSERT_GT(s3().retry().max_attempts, 1) << "with one attempt allowed, this test could not fail";
  EXPECT_EQ(attempts_in(refused_trace), 1u);
}

TEST_F(s3_conditional, an_if_match_on_a_missing_key_is_no_such_key) {
  const auto r = put("pools/team/never-written.json", "x", write_condition::if_match("\"0123\""));
  EXPECT_EQ(r.ec, errc::no_such_key) << r.message;
}

TEST_F(s3_conditional, writers_that_read_modify_and_write_back_with_if_match_lose_no_update) {
  constexpr int writers = 8;
  constexpr int writes_each = 5;
  const std::string key = "pools/team/storm.txt";
  ASSERT_FALSE(put(key, "", write_condition::create_only()).ec);

  std::vector<s3_session> sessions;
  for (int w = 0; w < writers; ++w) sessions.push_back(open_session());
  storm_tally t;
  std::vector<asio::awaitable<void>> tasks;
  for (int w = 0; w < writers; ++w)
    tasks.push_back(append_lines(*sessions[w].s3, trace.root(), key, fmt::format("writer-{}", w), writes_each, t));
  run(run_all(std::move(tasks)));
  ASSERT_TRUE(t.failures.empty()) << ::testing::PrintToString(t.failures);
  EXPECT_EQ(t.landed, writers * writes_each);
  std::cout << "[ storm    ] " << writers << " writers, " << t.landed << " writes landed, " << t.refused
            << " refused by If-Match\n";

  std::vector<std::string> lines;
  std::istringstream in(get(key).bytes);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::vector<std::string> expected;
  for (int w = 0; w < writers; ++w)
    for (int n = 0; n < writes_each; ++n) expected.push_back(fmt::format("writer-{} {}", w, n));
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, expected) << "every write once: none lost, none twice";
}

TEST_F(s3_conditional, the_aws_cli_reads_a_conditional_write_with_the_same_etag) {
  const std::string key = "pools/team/by-ferry.json";
  const std::string body = R"({"node":"n1","state":"idle"})";
  const auto written = put(key, body, write_condition::create_only());
  ASSERT_FALSE(written.ec) << written.message;
  const auto out = dir / "by-aws";
  const auto r = moto_->aws({"s3api", "get-object", "--bucket", std::string(bucket), "--key", key, out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::read_file(out), body);
  EXPECT_EQ(std::string(boost::json::parse(r.out).at("ETag").as_string()), written.etag);
}

}  // namespace
}  // namespace ferry::net::conditional_writes
