// The retry helper on its own, with fake attempts and no network: what it retries, how often, how
// long it waits, what it traces, and that cancellation ends its wait.
#include "net/cancellation.hpp"
#include "net/error.hpp"
#include "net/retry.hpp"
#include "tracing/sink.hpp"

#include "support/temp_dir.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <sstream>

namespace ferry::net {
namespace {

using namespace std::chrono_literals;
using test::temp_dir;

namespace asio = boost::asio;

std::string_view text(const boost::json::object& message, std::string_view key) {
  const auto* v = message.if_contains(key);
  return v && v->is_string() ? std::string_view(v->as_string()) : std::string_view();
}

config::retry_settings policy(int max_attempts, config::duration base = 1ms, config::duration max = 5ms) {
  return {.max_attempts = max_attempts, .base_delay = base, .max_delay = max};
}

// A fake attempt: fails with each of `failures` in turn, then succeeds with 42.
struct scripted_attempt {
  std::vector<error_code> failures;
  std::optional<std::chrono::milliseconds> retry_after;
  int calls = 0;

  asio::awaitable<result<int>> operator()(tracing::action&, attempt_info& info) {
    const auto n = static_cast<std::size_t>(calls++);
    EXPECT_EQ(info.number, calls);
    if (n >= failures.size()) co_return 42;
    info.diag.set("failure " + std::to_string(calls));
    info.retry_after = retry_after;
    co_return failures[n];
  }
};

// with_retry under a root action whose trace goes to a file, read back afterwards.
class retry : public ::testing::Test {
 protected:
  // Runs with_retry to the end on a fresh io_context. The attempt is passed by reference, so that the
  // test can count its calls.
  result<int> run(scripted_attempt& attempt, const config::retry_settings& p) {
    asio::io_context io;
    auto done = asio::co_spawn(io, retrying(attempt, p), asio::use_future);
    io.run();
    return done.get();
  }

  asio::awaitable<result<int>> retrying(scripted_attempt& attempt, config::retry_settings p) {
    co_await accept_cancellation();
    auto call = [&attempt](tracing::action& act, attempt_info& info) { return attempt(act, info); };
    co_return co_await with_retry<int>(root(), "test:attempt", p, call, diag);
  }

  tracing::action& root() {
    if (!out) {
      diagnostics open_diag;
      auto s = tracing::sink::open(dir / "trace.jsonl", open_diag);
      if (!s) throw std::runtime_error(open_diag.message);
      out = std::move(*s);
      task.emplace(tracing::action::start_task(*out, "test:retry"));
    }
    return *task;
  }

  // The start and end messages of every traced attempt, in order.
  std::vector<boost::json::object> attempts() {
    root();
    task.reset();  // ends the task
    out->flush();
    std::vector<boost::json::object> found;
    std::istringstream in(test::read_file(dir / "trace.jsonl"));
    for (std::string line; std::getline(in, line);) {
      auto message = boost::json::parse(line).as_object();
      if (text(message, "action_type") == "test:attempt") found.push_back(std::move(message));
    }
    return found;
  }

  static std::vector<std::string> statuses(const std::vector<boost::json::object>& messages) {
    std::vector<std::string> out;
    for (const auto& m : messages) out.emplace_back(text(m, "action_status"));
    return out;
  }

  temp_dir dir;
  diagnostics diag;
  std::unique_ptr<tracing::sink> out;  // declared before the task, which writes to it as it ends
  std::optional<tracing::action> task;
};

TEST_F(retry, succeeds_after_retryable_failures_with_each_attempt_traced) {
  scripted_attempt attempt{.failures = {make_error_code(errc::server_error), make_error_code(errc::connection_failed),
                                        make_error_code(errc::timeout)}};
  const auto r = run(attempt, policy(5));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(attempt.calls, 4);

  const auto messages = attempts();
  EXPECT_EQ(statuses(messages), (std::vector<std::string>{"started", "failed", "started", "failed", "started",
                                                          "failed", "started", "succeeded"}));
  std::vector<std::int64_t> numbers;
  for (const auto& m : messages) {
    if (text(m, "action_status") == "started") numbers.push_back(m.at("attempt").as_int64());
    // Every failure that leads to another attempt says how long the helper waits before it.
    if (text(m, "action_status") == "failed") {
      EXPECT_TRUE(m.contains("retry_in_ms")) << m;
    }
  }
  EXPECT_EQ(numbers, (std::vector<std::int64_t>{1, 2, 3, 4}));
}

TEST_F(retry, stops_at_max_attempts_with_the_last_error) {
  scripted_attempt attempt{.failures = std::vector<error_code>(10, make_error_code(errc::server_error))};
  const auto r = run(attempt, policy(3));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::server_error);
  EXPECT_EQ(attempt.calls, 3);
  EXPECT_EQ(diag.message, "failure 3");  // the last attempt's diagnostics reach the caller

  const auto messages = attempts();
  EXPECT_EQ(statuses(messages), (std::vector<std::string>{"started", "failed", "started", "failed", "started", "failed"}));
  EXPECT_FALSE(messages.back().contains("retry_in_ms")) << "no wait follows the last attempt";
}

TEST_F(retry, does_not_retry_an_error_another_attempt_cannot_fix) {
  for (const auto code : {errc::no_such_key, errc::access_denied, errc::no_such_bucket}) {
    scripted_attempt attempt{.failures = {make_error_code(code)}};
    const auto r = run(attempt, policy(5));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), code);
    EXPECT_EQ(attempt.calls, 1) << make_error_code(code).message();
  }
  const auto messages = attempts();
  EXPECT_EQ(messages.size(), 6u);  // three attempts, each started and failed once
  for (const auto& m : messages) EXPECT_FALSE(m.contains("retry_in_ms")) << m;
}

TEST_F(retry, waits_at_least_as_long_as_the_server_asks) {
  // The backoff alone would wait at most 1 ms; the server's Retry-After asks for 200.
  scripted_attempt attempt{.failures = {make_error_code(errc::throttled)}, .retry_after = 200ms};
  const auto r = run(attempt, policy(3, 1ms, 1ms));
  ASSERT_TRUE(r);
  const auto messages = attempts();
  ASSERT_EQ(statuses(messages), (std::vector<std::string>{"started", "failed", "started", "succeeded"}));
  EXPECT_GE(messages[1].at("retry_in_ms").as_int64(), 200);
}

TEST_F(retry, backoff_delay_stays_under_the_doubling_ceiling_and_is_jittered) {
  const auto p = policy(10, 100ms, 1000ms);
  for (int next = 2; next <= 40; ++next) {
    const auto doublings = std::min(next - 2, 20);
    const auto ceiling = std::min<std::int64_t>(1000, std::int64_t{100} << doublings);
    std::set<std::int64_t> seen;
    for (int draw = 0; draw < 1000; ++draw) {
      const auto d = backoff_delay(p, next).count();
      ASSERT_GE(d, 0) << "attempt " << next;
      ASSERT_LE(d, ceiling) << "attempt " << next;
      seen.insert(d);
    }
    // Full jitter: many different waits, reaching up into the top half of the range.
    EXPECT_GT(seen.size(), 10u) << "attempt " << next;
    EXPECT_GT(*seen.rbegin(), ceiling / 2) << "attempt " << next;
  }
}

TEST_F(retry, is_retryable_says_yes_to_transient_failures_only) {
  for (const auto code : {errc::connection_failed, errc::timeout, errc::server_error, errc::throttled})
    EXPECT_TRUE(is_retryable(make_error_code(code))) << make_error_code(code).message();
  for (const auto code : {errc::no_such_bucket, errc::no_such_key, errc::access_denied, errc::tls_failed,
                          errc::bad_response, errc::body_too_large})
    EXPECT_FALSE(is_retryable(make_error_code(code))) << make_error_code(code).message();
  EXPECT_FALSE(is_retryable(asio::error::operation_aborted));
}

TEST_F(retry, cancellation_ends_the_wait_between_attempts) {
  // Retry-After of an hour: the test can only finish if cancellation cuts the wait short.
  scripted_attempt attempt{.failures = {make_error_code(errc::throttled)}, .retry_after = 1h};
  asio::io_context io;
  asio::cancellation_signal stop;
  std::optional<result<int>> outcome;
  asio::co_spawn(io, retrying(attempt, policy(3)),
                 asio::bind_cancellation_slot(stop.slot(), [&](std::exception_ptr e, result<int> r) {
                   if (e) std::rethrow_exception(e);
                   outcome = r;
                 }));
  while (attempt.calls == 0) io.run_one();
  io.poll();  // on to the wait
  ASSERT_FALSE(outcome);
  stop.emit(asio::cancellation_type::total);
  io.run_for(60s);  // returns as soon as the coroutine is done; the bound only turns a hang into a failure
  ASSERT_TRUE(outcome) << "still waiting after cancellation";
  ASSERT_FALSE(*outcome);
  EXPECT_EQ(outcome->error(), asio::error::operation_aborted);
  EXPECT_EQ(attempt.calls, 1);
}

}  // namespace
}  // namespace ferry::net
