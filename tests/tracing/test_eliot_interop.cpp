// Traces checked by eliot's own parser (Debian's python3-eliot), and tasks that cross processes.
#include "tracing/action.hpp"
#include "tracing/sink.hpp"

#include "support/eliot.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>

namespace ferry::tracing {
namespace {

namespace asio = boost::asio;
using test::eliot_parse;
using test::flatten;
using test::temp_dir;

std::unique_ptr<sink> open_sink(const std::filesystem::path& p) {
  diagnostics diag;
  auto s = sink::open(p, diag);
  EXPECT_TRUE(s) << diag.message;
  return std::move(*s);
}

// A step that waits "forever" and records how it ended.
asio::awaitable<void> waiting_step(action& parent) {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
  auto act = parent.child("test:wait");
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::hours(1));
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  act.finish(ec, {});
}

TEST(eliot_interop, failed_and_cancelled_actions_parse_as_complete_tasks) {
  temp_dir dir;
  const auto file = dir / "t.jsonl";
  {
    auto out = open_sink(file);
    auto root = action::start_task(*out, "test:root", {{"answer", 42}});
    {
      auto failed = root.child("test:fails");
      diagnostics diag;
      diag.set("bucket 'b' does not exist");
      failed.fail(make_error_code(sys::errc::no_such_file_or_directory), diag);
    }
    root.log("test:message", {{"note", "between"}});
    {
      // Cancelled through its cancellation slot, as Ctrl-C cancels a command.
      asio::io_context io;
      asio::cancellation_signal cancel;
      asio::co_spawn(io, waiting_step(root), asio::bind_cancellation_slot(cancel.slot(), asio::detached));
      io.poll();
      cancel.emit(asio::cancellation_type::total);
      io.run();
    }
    {
      // Torn down with its io_context while suspended: the frame's destructor ends the action.
      asio::io_context io;
      asio::co_spawn(io, waiting_step(root), asio::detached);
      io.poll();
    }
    root.succeed();
  }
  const auto tasks = eliot_parse({file});
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].at("complete").as_bool());
  const auto tree = flatten(tasks[0].at("root"));
  EXPECT_EQ(tree, (std::vector<std::string>{"test:root:succeeded", "  test:fails:failed", "  msg test:message",
                                            "  test:wait:failed", "  test:wait:failed"}));
  const auto& children = tasks[0].at("root").at("children").as_array();
  EXPECT_EQ(children[0].at("reason"), "bucket 'b' does not exist");
  EXPECT_EQ(children[2].at("reason"), "cancelled");
  EXPECT_EQ(children[3].at("reason"), "cancelled");
}

TEST(eliot_interop, an_action_unwound_by_an_exception_ends_failed) {
  temp_dir dir;
  const auto file = dir / "t.jsonl";
  {
    auto out = open_sink(file);
    auto root = action::start_task(*out, "test:root");
    try {
      auto act = root.child("test:throws");
      throw std::runtime_error("boom");
    } catch (const std::runtime_error&) {
    }
    root.succeed();
  }
  const auto tasks = eliot_parse({file});
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].at("complete").as_bool());
  EXPECT_EQ(flatten(tasks[0].at("root")), (std::vector<std::string>{"test:root:succeeded", "  test:throws:failed"}));
}

TEST(eliot_interop, a_python_process_continues_a_task_started_here) {
  temp_dir dir;
  const auto ours = dir / "ferry.jsonl";
  const auto theirs = dir / "python.jsonl";
  {
    auto out = open_sink(ours);
    auto root = action::start_task(*out, "test:spawn");
    const auto r = test::run({test::system_python, test::peer_script("eliot_child.py"), theirs.string()},
                             {.env = {{"FERRY_TASK_ID", root.serialize_task_id()}}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    root.succeed();
  }
  // Alone, our file has a hole where the child's actions go; with the child's file the task is whole.
  const auto alone = eliot_parse({ours});
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_FALSE(alone[0].at("complete").as_bool());
  const auto merged = eliot_parse({ours, theirs});
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_TRUE(merged[0].at("complete").as_bool());
  EXPECT_EQ(flatten(merged[0].at("root")),
            (std::vector<std::string>{"test:spawn:succeeded", "  eliot:remote_task:succeeded",
                                      "    python:work:succeeded"}));
}

TEST(eliot_interop, secrets_never_reach_the_file) {
  temp_dir dir;
  const auto file = dir / "t.jsonl";
  {
    auto out = open_sink(file);
    auto root = action::start_task(*out, "test:secrets",
                                   {{"aws_secret_access_key", "wJalrXUtnFEMI/K7MDENG"},
                                    {"session_token", "FQoGZXIvYXdzEXAMPLETOKEN"},
                                    {"password", "hunter2"},
                                    {"url", "http://h/b/k?X-Amz-Credential=AKID%2F2015&X-Amz-Signature=deadbeef00&x=1"}});
    boost::json::value nested = {{"headers", {{"Authorization", "AWS4-HMAC-SHA256 Signature=abcdef0123"}}}};
    root.log("test:request", {{"request", nested}});
    diagnostics diag;
    diag.set("GET http://h/b/k?X-Amz-Security-Token=SECRETTOKEN9&X-Amz-Signature=cafe1234 failed");
    root.fail(make_error_code(sys::errc::io_error), diag);
  }
  const auto text = test::read_file(file);
  for (const char* secret : {"wJalrXUtnFEMI", "EXAMPLETOKEN", "hunter2", "deadbeef00", "abcdef0123", "SECRETTOKEN9",
                             "cafe1234"})
    EXPECT_EQ(text.find(secret), std::string::npos) << secret << " leaked into:\n" << text;
  EXPECT_NE(text.find("X-Amz-Credential=AKID"), std::string::npos);  // not a secret: kept for debugging
  EXPECT_TRUE(eliot_parse({file})[0].at("complete").as_bool());
}

}  // namespace
}  // namespace ferry::tracing
