// `ferry-node lease-run` and `lease-set` (agent/node/lease_run.hpp), the real binary run here: a command
// under a lease that expires is ended (TERM, then KILL after the grace for one that ignores TERM) with
// exit 124 and its stderr line; a lease moved forward keeps it past the first expiry; its own exit code or
// signal is lease-run's; a TERM sent to lease-run reaches it; lease-set never moves an expiry earlier and
// refuses garbage; lease-run without a lease file never starts the command. Then the agent's half
// (agent/provide/node_lease.hpp) over a real sshd: set_node_lease and wrap_in_lease end a command whose
// lease expired, with its --env values on stdin still reaching it.
//
// Nothing here is timed: each test waits for the event (bounded generously, then fails), and a lease's
// expiry is a few seconds ahead of the wall clock.
#include "agent/node/lease_watch.hpp"
#include "agent/provide/node_lease.hpp"
#include "net/exec_streams.hpp"
#include "net/ssh_node_link.hpp"
#include "tracing/action_types.hpp"

#include "../net/ssh_harness.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

// A namespace of its own: the test binary is a unity build, and other files' helpers share its names.
namespace ferry::agent::lease_tests {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::int64_t now_seconds() { return static_cast<std::int64_t>(std::time(nullptr)); }

// Waits (polling, bounded) until `done` holds; false when it never did.
template <class F>
bool eventually(F done, std::chrono::milliseconds limit = 60s) {
  for (auto waited = 0ms; waited < limit; waited += 20ms) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

// ferry-node with `args`, stdout dropped and stderr in a file; its raw wait status once it ended.
class node_run {
 public:
  node_run(std::vector<std::string> args, fs::path err) : err_(std::move(err)) {
    args.insert(args.begin(), FERRY_NODE_PROGRAM);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    auto pointers = test::c_pointers(args);
    if (::posix_spawn(&pid_, args[0].c_str(), &actions, nullptr, pointers.data(), environ) != 0)
      throw std::runtime_error("cannot start the node program");
    posix_spawn_file_actions_destroy(&actions);
  }
  ~node_run() {
    if (!status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  bool running() {
    int s = 0;
    if (!status_ && ::waitpid(pid_, &s, WNOHANG) == pid_) status_ = s;
    return !status_;
  }
  // Its status; a program still running after the bound is killed, and the test fails.
  int wait(std::chrono::milliseconds limit = 60s) {
    if (!eventually([&] { return !running(); }, limit)) {
      ADD_FAILURE() << "ferry-node still ran after " << limit.count() << " ms; stderr: " << err();
      ::kill(pid_, SIGKILL);
      int s = 0;
      ::waitpid(pid_, &s, 0);
      status_ = s;
    }
    return *status_;
  }
  std::string err() const { return test::read_file(err_); }

 private:
  fs::path err_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

bool alive(pid_t pid) { return pid > 0 && !test::dead_or_zombie(pid); }

class node_lease : public ::testing::Test {
 protected:
  fs::path file() const { return dir_ / "cache" / "leases" / lease_; }
  fs::path pid_file() const { return dir_ / "command.pid"; }

  test::process_result lease_set(std::string value, std::string lease_file = {}) {
    return test::run({FERRY_NODE_PROGRAM, "lease-set", lease_file.empty() ? file().string() : lease_file, value});
  }
  void set_lease(std::int64_t expires_at) {
    const auto r = lease_set(std::to_string(expires_at));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // lease-run with `grace` around sh -c `script`, which first writes its pid.
  std::unique_ptr<node_run> start(const std::string& script, int grace = 5) {
    return std::make_unique<node_run>(
        std::vector<std::string>{"lease-run", file().string(), "--grace", std::to_string(grace), "--", "/bin/sh", "-c",
                                 fmt::format("echo $$ > {}.new && mv {}.new {}; {}", pid_file().string(),
                                             pid_file().string(), pid_file().string(), script)},
        dir_ / "stderr");
  }
  // The command's pid, once it wrote it.
  pid_t command_pid() {
    EXPECT_TRUE(eventually([&] { return fs::exists(pid_file()); })) << "the command never started";
    return test::read_pid(pid_file());
  }
  std::string expired_line(std::int64_t at) const {
    return fmt::format("ferry-node: lease {} expired at {}: command ended\n", lease_, at);
  }

  test::temp_dir dir_;
  std::string lease_ = "lease-3f9a";
};

TEST_F(node_lease, an_expired_lease_ends_its_command_with_124_and_says_so) {
  const auto expires = now_seconds() + 2;
  set_lease(expires);
  auto run = start("exec sleep 600");
  const auto command = command_pid();
  const int status = run->wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), node::lease_expired_exit) << run->err();
  EXPECT_EQ(run->err(), expired_line(expires));
  EXPECT_TRUE(eventually([&] { return !alive(command); })) << "the sleep still runs";
}

TEST_F(node_lease, a_lease_moved_forward_keeps_its_command_past_the_first_expiry_until_the_new_one) {
  const auto first = now_seconds() + 2;
  set_lease(first);
  auto run = start("exec sleep 600");
  const auto command = command_pid();
  const auto later = first + 4;
  set_lease(later);
  // Past the first expiry, and more than lease-run's read interval beyond it.
  while (now_seconds() < first + 2) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(run->running()) << run->err();
  EXPECT_TRUE(alive(command));
  const int status = run->wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), node::lease_expired_exit) << run->err();
  EXPECT_EQ(run->err(), expired_line(later));
}

TEST_F(node_lease, the_commands_exit_code_and_signal_are_its_own) {
  set_lease(now_seconds() + 600);
  auto seven = start("exit 7");
  int status = seven->wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_EQ(seven->err(), "");
  auto killed = start("kill -KILL $$");
  status = killed->wait();
  ASSERT_TRUE(WIFSIGNALED(status)) << status << " " << killed->err();
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST_F(node_lease, a_term_sent_to_lease_run_reaches_the_command) {
  set_lease(now_seconds() + 600);
  auto run = start("exec sleep 600");
  const auto command = command_pid();
  ::kill(run->pid(), SIGTERM);
  const int status = run->wait();
  ASSERT_TRUE(WIFSIGNALED(status)) << status << " " << run->err();
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_TRUE(eventually([&] { return !alive(command); }));
}

TEST_F(node_lease, a_command_that_ignores_term_is_killed_after_the_grace) {
  const auto expires = now_seconds() + 2;
  set_lease(expires);
  auto run = start("trap '' TERM; while :; do sleep 0.2; done", 1);
  const auto command = command_pid();
  const int status = run->wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), node::lease_expired_exit) << run->err();
  EXPECT_EQ(run->err(), expired_line(expires));
  EXPECT_TRUE(eventually([&] { return !alive(command); })) << "the shell that ignores TERM still runs";
}

TEST_F(node_lease, lease_set_writes_a_private_file_and_refuses_an_earlier_expiry_and_garbage) {
  set_lease(2'000'000'000);
  EXPECT_EQ(test::read_file(file()), "2000000000\n");
  struct stat st {};
  ASSERT_EQ(::stat(file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto r = lease_set("1900000000");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("already expires at 2000000000"), std::string::npos) << r.err;
  for (const auto* garbage : {"", "soon", "-1", "12abc", "1e9", "2100000000 "}) {
    r = lease_set(garbage);
    EXPECT_EQ(r.exit_code, 2) << garbage;
    EXPECT_NE(r.err.find("not an expiry"), std::string::npos) << r.err;
  }
  EXPECT_EQ(test::read_file(file()), "2000000000\n") << "nothing moved it earlier";
  set_lease(2'100'000'000);
  EXPECT_EQ(test::read_file(file()), "2100000000\n");
  r = lease_set("2200000000", (dir_ / "cache" / "leases" / "bad_id").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a lease id"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "cache" / "leases" / "bad_id"));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(file().parent_path())) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{lease_}) << "no temporary file is left";
}

TEST_F(node_lease, lease_run_without_its_lease_file_never_starts_the_command) {
  auto run = start("exec sleep 600");
  const int status = run->wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(run->err().find("cannot be read: the command is not started"), std::string::npos) << run->err();
  EXPECT_FALSE(fs::exists(pid_file()));
}

// ---- The agent's half, over a real sshd ----

std::shared_ptr<const node_program> the_program() {
  diagnostics diag;
  auto p = shared_node_program(FERRY_NODE_PROGRAM, diag);
  if (!p) throw std::runtime_error(diag.message);
  return *p;
}

class node_lease_link : public net::ssh_server_test {
 public:
  std::string cache() const { return (dir / "node-cache").string(); }
};

// Installs the program, sets the lease to expire at `expires_at`, then runs `argv` wrapped in it with
// `vars` on stdin; the run's output and exit.
asio::awaitable<result<net::command_output>> run_leased(node_lease_link& t, std::string lease, std::int64_t expires_at,
                                                        env_vars vars, std::vector<std::string> argv,
                                                        diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  net::ssh_node_link link(*session);
  const auto& program = *the_program();
  auto installed = co_await install_node_program(t.trace.root(), link, program, t.cache(), "", diag);
  if (!installed) co_return installed.error();
  auto set = co_await set_node_lease(t.trace.root(), link, program, t.cache(), lease, expires_at, diag);
  if (!set) co_return set.error();
  // A late renewal does not shorten it, and is no failure.
  auto late = co_await set_node_lease(t.trace.root(), link, program, t.cache(), lease, expires_at - 100, diag);
  if (!late) co_return late.error();
  environment env;
  env.workdir = t.dir.path().string();
  auto line = task_command(env, "task-id", vars, argv);
  wrap_in_lease(line, program, t.cache(), lease, 1s);
  net::buffer_source input(line.input);
  net::collect_sink sink(1 << 20);
  const net::exec_request request{line.command, &input, &sink};
  auto done = co_await link.exec(t.trace.root(), request, diag);
  (*session)->close();
  if (!done) co_return done.error();
  net::command_output out;
  out.exit = *done;
  out.out = sink.out;
  out.err = sink.err;
  co_return out;
}

TEST_F(node_lease_link, a_command_whose_lease_expires_is_ended_on_the_node_and_its_exit_says_so) {
  diagnostics diag;
  const auto expires = now_seconds() + 2;
  const auto r = run(run_leased(*this, "lease-7c1", expires, {{"GREETING", "it's me"}},
                                {"sh", "-c", "echo \"$GREETING\"; exec sleep 600"}, diag));
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->out, "it's me\n");
  EXPECT_EQ(r->exit.status, node::lease_expired_exit) << r->exit.describe() << " " << r->err;
  EXPECT_EQ(r->err, fmt::format("ferry-node: lease lease-7c1 expired at {}: command ended\n", expires));
  EXPECT_EQ(test::read_file(fs::path(cache()) / "leases" / "lease-7c1"), fmt::format("{}\n", expires));
  const auto traced = trace_text();
  EXPECT_NE(traced.find(std::string(action_types::node::lease)), std::string::npos);
  EXPECT_NE(traced.find(R"("kept":true)"), std::string::npos) << "the late renewal left the later expiry";
  for (const pid_t pid : server.processes())
    EXPECT_EQ(test::read_file(fmt::format("/proc/{}/cmdline", pid)).find(std::string("sleep") + '\0' + "600"), std::string::npos);
}

TEST_F(node_lease_link, a_command_under_a_live_lease_keeps_its_exit_status) {
  diagnostics diag;
  const auto r = run(run_leased(*this, "lease-8d2", now_seconds() + 600, {}, {"sh", "-c", "exit 7"}, diag));
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->exit.status, 7) << r->exit.describe() << " " << r->err;
  EXPECT_EQ(r->err, "");
}

TEST(node_lease_file, is_under_the_cache_and_refuses_what_is_not_a_lease_id) {
  EXPECT_EQ(lease_file("/var/cache/ferry", "a-1"), "/var/cache/ferry/leases/a-1");
  EXPECT_EQ(lease_file("", "a-1"), "${XDG_CACHE_HOME:-$HOME/.cache}/ferry/leases/a-1");
  EXPECT_THROW(lease_file("/c", "../x"), std::invalid_argument);
  EXPECT_THROW(lease_file("/c", ""), std::invalid_argument);
}

}  // namespace
}  // namespace ferry::agent::lease_tests
