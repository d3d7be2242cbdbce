// Local child processes through net::run_child: exit codes and signals, the environment and working
// directory, an explicit executable, output limits, and that the deadline and cancellation kill the child's
// whole process group and reap the child, while leftovers::keep lets a launcher's detached child live.
#include "net/cancellation.hpp"
#include "net/child_process.hpp"

#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>
#include <unistd.h>

namespace ferry::net {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::dead_or_zombie;
using test::read_pid;
using test::temp_dir;

// Whether `pid` is gone entirely: not even a zombie is left of it.
bool reaped(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

// A process group's member gets SIGKILL with it; it dies as soon as the kernel runs it.
bool dies_soon(pid_t pid) {
  for (int i = 0; i < 1000 && !dead_or_zombie(pid); ++i) std::this_thread::sleep_for(10ms);
  return dead_or_zombie(pid);
}

child_request shell(std::string script, config::duration timeout = 60s) {
  return {.argv = {"/bin/sh", "-c", std::move(script)}, .timeout = timeout};
}

class child_process : public ::testing::Test {
 protected:
  result<child_result> run(const child_request& request) {
    asio::io_context io;
    auto done = asio::co_spawn(io, running(request), asio::use_future);
    io.run();
    return done.get();
  }

  asio::awaitable<result<child_result>> running(child_request request) {
    co_await accept_cancellation();
    co_return co_await run_child(request, diag);
  }

  // The script records its pid and its background child's, then waits.
  std::string sleeping_script() const {
    return fmt::format("echo $$ > {0}/pid.tmp && mv {0}/pid.tmp {0}/pid\n"
                       "sleep 60 &\necho $! > {0}/grandchild\nwait",
                       dir.path().string());
  }

  temp_dir dir;
  diagnostics diag;
};

TEST_F(child_process, output_and_a_nonzero_exit_are_an_answer_not_a_failure) {
  const auto r = run(shell("echo out; echo err >&2; exit 3"));
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->signal, 0);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST_F(child_process, death_by_signal_is_told_apart_from_an_exit_status) {
  const auto r = run(shell("kill -TERM $$"));
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->signal, SIGTERM);
  EXPECT_EQ(r->exit_code, 128 + SIGTERM);
}

TEST_F(child_process, stdin_is_at_its_end) {
  const auto r = run(shell("cat; echo done"));
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->out, "done\n");
}

TEST_F(child_process, the_environment_is_ferrys_own_unless_one_is_given) {
  ASSERT_EQ(::setenv("FERRY_CHILD_PROCESS_TEST", "inherited", 1), 0);
  const auto inherited = run(shell("printf '%s' \"${FERRY_CHILD_PROCESS_TEST-unset}\""));
  auto request = shell("printf '%s|%s' \"${FERRY_CHILD_PROCESS_TEST-unset}\" \"$ONLY_HERE\"");
  request.environment = std::vector<std::string>{"ONLY_HERE=given", "PATH=/usr/bin:/bin"};
  const auto given = run(request);
  ::unsetenv("FERRY_CHILD_PROCESS_TEST");
  ASSERT_TRUE(inherited) << diag.message;
  EXPECT_EQ(inherited->out, "inherited");
  ASSERT_TRUE(given) << diag.message;
  EXPECT_EQ(given->out, "unset|given");
}

TEST_F(child_process, runs_in_the_working_directory_given) {
  fs::create_directories(dir / "work");
  auto request = shell("pwd -P");
  request.working_dir = dir / "work";
  const auto r = run(request);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->out, fs::canonical(dir / "work").string() + "\n");
}

TEST_F(child_process, an_explicit_executable_is_run_whatever_argv0_says) {
  const child_request request{.argv = {"ferry-no-such-shell", "-c", "echo \"$0\""},
                              .executable = "/bin/sh",
                              .timeout = 60s};
  const auto r = run(request);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->out, "ferry-no-such-shell\n");
}

TEST_F(child_process, a_program_that_cannot_start_is_named) {
  const auto r = run({.argv = {"ferry-no-such-program", "x"}, .timeout = 60s});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), sys::errc::no_such_file_or_directory);
  EXPECT_NE(diag.message.find("cannot start ferry-no-such-program"), std::string::npos) << diag.message;
}

TEST_F(child_process, output_past_the_limit_is_read_to_the_end_but_kept_in_part) {
  // seq prints "1\n" to "100000\n" (588,895 bytes), far more than a pipe holds.
  auto request = shell("seq 1 100000; seq 1 100000 >&2");
  request.out_limit = {.bytes = 10};
  request.err_limit = {.bytes = 13, .keep_tail = true};
  const auto r = run(request);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->out, "1\n2\n3\n4\n5\n");
  EXPECT_EQ(r->err, "99999\n100000\n");
}

TEST_F(child_process, the_deadline_kills_the_group_and_reaps_the_child) {
  const auto r = run(shell(sleeping_script(), 1s));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), asio::error::timed_out);
  EXPECT_NE(diag.message.find("/bin/sh -c"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("did not finish within 1s"), std::string::npos) << diag.message;
  const auto pid = read_pid(dir / "pid");
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(reaped(pid));
  const auto grandchild = read_pid(dir / "grandchild");
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(dies_soon(grandchild)) << "the child's child " << grandchild << " outlived it";
}

TEST_F(child_process, cancellation_kills_the_group_and_reaps_the_child) {
  asio::io_context io;
  asio::cancellation_signal stop;
  std::optional<result<child_result>> outcome;
  asio::co_spawn(io, running(shell(sleeping_script())),
                 asio::bind_cancellation_slot(stop.slot(), [&](std::exception_ptr e, result<child_result> r) {
                   if (e) std::rethrow_exception(e);
                   outcome = std::move(r);
                 }));
  // Until the child has started its own; the bound only turns a hang into a failure.
  for (int i = 0; i < 6000 && !fs::exists(dir / "grandchild") && !outcome; ++i) io.run_for(10ms);
  ASSERT_FALSE(outcome) << diag.message;
  stop.emit(asio::cancellation_type::total);
  io.run_for(60s);
  ASSERT_TRUE(outcome) << "still waiting after cancellation";
  ASSERT_FALSE(*outcome);
  EXPECT_EQ(outcome->error(), asio::error::operation_aborted);
  EXPECT_TRUE(reaped(read_pid(dir / "pid")));
  const auto grandchild = read_pid(dir / "grandchild");
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(dies_soon(grandchild)) << "the child's child " << grandchild << " outlived it";
}

// A launcher: its background child is still in its group when it exits (it never calls setsid here).
constexpr const char* launcher = "sleep 60 </dev/null >/dev/null 2>&1 & echo $!";

TEST_F(child_process, what_an_exited_child_leaves_in_its_group_is_killed) {
  const auto r = run(shell(launcher));
  ASSERT_TRUE(r) << diag.message;
  const pid_t left = std::atoi(r->out.c_str());
  ASSERT_GT(left, 0) << r->out;
  EXPECT_TRUE(dies_soon(left)) << "the launched " << left << " outlived its launcher";
}

TEST_F(child_process, leftovers_keep_lets_a_launched_child_live) {
  auto request = shell(launcher);
  request.after_exit = leftovers::keep;
  const auto r = run(request);
  ASSERT_TRUE(r) << diag.message;
  const pid_t left = std::atoi(r->out.c_str());
  ASSERT_GT(left, 0) << r->out;
  EXPECT_FALSE(dead_or_zombie(left)) << "the launched " << left << " was killed with its launcher";
  ::kill(left, SIGKILL);
}

TEST(child_process_command_line, quotes_only_what_needs_it) {
  EXPECT_EQ(command_line({"ip", "link", "a b", "it's", ""}), "ip link 'a b' 'it'\\''s' ''");
}

}  // namespace
}  // namespace ferry::net
