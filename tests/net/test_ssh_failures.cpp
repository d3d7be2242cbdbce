// How ferry's SSH layer fails, against a real sshd (or nothing): a changed host key, refused and
// unanswered connections, a login the node refuses, a server killed or frozen mid-command, a cancelled
// command (whose remote processes must die), and an idle session.
#include "ssh_harness.hpp"

#include "net/error.hpp"
#include "net/run_all.hpp"
#include "net/shell_quote.hpp"
#include "tracing/action_types.hpp"

#include "support/loopback_listener.hpp"
#include "support/moto.hpp"  // pick_free_port
#include "support/process.hpp"
#include "support/quoted.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace ferry::net {
namespace {

using namespace asio::experimental::awaitable_operators;
using clock = std::chrono::steady_clock;

std::chrono::milliseconds since(clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
}

bool mentions(const std::string& text, std::string_view what) { return text.find(what) != std::string::npos; }

asio::awaitable<error_code> connect_only(ssh_harness& t, const test::sshd_server& server, std::string node,
                                         diagnostics& diag) {
  auto session = co_await t.connect(server, diag, std::move(node));
  co_return session ? error_code{} : session.error();
}

asio::awaitable<error_code> connect_to(ssh_harness& t, ssh_peer peer, diagnostics& diag) {
  auto session = co_await ssh_connect(t.trace.root(), std::move(peer), t.options, diag);
  co_return session ? error_code{} : session.error();
}

using ssh_failures = ssh_server_test;
using ssh_connect_failures = ssh_harness;  // against no server, or one of their own

TEST_F(ssh_failures, a_changed_host_key_is_refused_naming_node_file_and_fingerprints) {
  diagnostics diag;
  ASSERT_FALSE(run(connect_only(*this, server, "node-1", diag))) << diag.message;
  const auto old_fingerprint = server.host_key_fingerprint();
  server.restart(true);
  const auto new_fingerprint = server.host_key_fingerprint();
  ASSERT_NE(old_fingerprint, new_fingerprint);

  const auto ec = run(connect_only(*this, server, "node-1", diag));
  EXPECT_EQ(ec, make_error_code(errc::host_key_changed)) << diag.message;
  EXPECT_TRUE(mentions(diag.message, "node-1")) << diag.message;
  EXPECT_TRUE(mentions(diag.message, options.known_hosts.string())) << diag.message;
  EXPECT_TRUE(mentions(diag.message, old_fingerprint)) << diag.message;
  EXPECT_TRUE(mentions(diag.message, new_fingerprint)) << diag.message;
  // The same address under a new node id is a new node: trusted on first use.
  EXPECT_FALSE(run(connect_only(*this, server, "node-2", diag))) << diag.message;
}

TEST_F(ssh_connect_failures, a_refused_port_fails_at_once_naming_node_and_address) {
  const auto port = test::pick_free_port();
  diagnostics diag;
  const auto start = clock::now();
  const auto ec = run(connect_to(*this, {"node-r", "127.0.0.1", port, "root"}, diag));
  EXPECT_EQ(ec, make_error_code(errc::connection_failed)) << diag.message;
  EXPECT_LT(since(start), 2s);
  EXPECT_TRUE(mentions(diag.message, fmt::format("node node-r (127.0.0.1:{})", port))) << diag.message;
  EXPECT_TRUE(mentions(diag.message, "refused")) << diag.message;
}

TEST_F(ssh_connect_failures, an_unreachable_address_fails_within_the_connect_timeout) {
  options.settings.connect_timeout = 700ms;
  diagnostics diag;
  const auto start = clock::now();
  const auto ec = run(connect_to(*this, {"node-b", "10.255.255.1", 22, "root"}, diag));
  const auto took = since(start);
  // A blackhole times out; a network that says "unreachable" (or, in some sandboxes, answers every
  // address and hangs up) fails sooner. Either is in time; the blackhole test below is deterministic.
  EXPECT_TRUE(ec == make_error_code(errc::timeout) || ec == make_error_code(errc::connection_failed)) << ec.message();
  EXPECT_LT(took, 1500ms);
  EXPECT_TRUE(mentions(diag.message, "node node-b (10.255.255.1:22)")) << diag.message;
  if (ec == make_error_code(errc::timeout)) {
    EXPECT_GE(took, 600ms);
    EXPECT_TRUE(mentions(diag.message, "ssh.connect_timeout")) << diag.message;
  }
  std::cout << "10.255.255.1: " << diag.message << " after " << took.count() << " ms\n";
}

// A server that accepts TCP connections (the kernel does, into the backlog) but never says a word.
class silent_listener {
 public:
  silent_listener() {
    const auto listener = test::listen_on_loopback("silent_listener", 8);
    fd_ = listener.fd;
    port_ = listener.port;
  }
  ~silent_listener() { ::close(fd_); }
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// A listener whose accept queue is full: the kernel drops further SYNs, as a firewall that drops
// packets would. (listen(0) queues one connection; two more fill it for sure.)
class blackhole_listener {
 public:
  blackhole_listener() {
    const auto listener = test::listen_on_loopback("blackhole_listener", 0);
    listen_fd_ = listener.fd;
    port_ = listener.port;
    for (int i = 0; i < 3; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      const auto to = loopback(port_);
      ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to);
      fillers_.push_back(fd);
    }
    std::this_thread::sleep_for(100ms);
  }
  ~blackhole_listener() {
    for (const int fd : fillers_) ::close(fd);
    ::close(listen_fd_);
  }
  std::uint16_t port() const { return port_; }

 private:
  static sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
  }
  int listen_fd_ = -1;
  std::vector<int> fillers_;
  std::uint16_t port_ = 0;
};

TEST_F(ssh_connect_failures, a_blackholed_tcp_connect_fails_within_the_connect_timeout) {
  blackhole_listener blackhole;
  options.settings.connect_timeout = 600ms;
  diagnostics diag;
  const auto start = clock::now();
  const auto ec = run(connect_to(*this, {"node-h", "127.0.0.1", blackhole.port(), "root"}, diag));
  const auto took = since(start);
  EXPECT_EQ(ec, make_error_code(errc::timeout)) << diag.message;
  EXPECT_GE(took, 550ms);
  EXPECT_LT(took, 1500ms);
  EXPECT_TRUE(mentions(diag.message, "in the TCP connect")) << diag.message;
  EXPECT_TRUE(mentions(diag.message, fmt::format("node node-h (127.0.0.1:{})", blackhole.port()))) << diag.message;
  EXPECT_TRUE(mentions(diag.message, "600 ms (ssh.connect_timeout)")) << diag.message;
}

TEST_F(ssh_connect_failures, a_server_that_never_answers_fails_within_the_connect_timeout) {
  silent_listener silent;
  options.settings.connect_timeout = 500ms;
  diagnostics diag;
  const auto start = clock::now();
  const auto ec = run(connect_to(*this, {"node-s", "127.0.0.1", silent.port(), "root"}, diag));
  const auto took = since(start);
  EXPECT_EQ(ec, make_error_code(errc::timeout)) << diag.message;
  EXPECT_GE(took, 450ms);
  EXPECT_LT(took, 1500ms);
  EXPECT_TRUE(mentions(diag.message, "SSH handshake")) << diag.message;
  EXPECT_TRUE(mentions(diag.message, "node-s")) << diag.message;
}

TEST_F(ssh_connect_failures, a_login_the_node_refuses_says_which_key_to_authorize) {
  test::sshd_server stranger;  // ferry's key is not in its authorized_keys
  diagnostics diag;
  const auto ec = run(connect_only(*this, stranger, "node-x", diag));
  EXPECT_EQ(ec, make_error_code(errc::ssh_auth_failed)) << diag.message;
  EXPECT_TRUE(mentions(diag.message, "node-x")) << diag.message;
  EXPECT_TRUE(mentions(diag.message, own_key_path(options.config_dir).string() + ".pub")) << diag.message;
}

// Runs `sleep 60` and, once it runs, does something to the server; records how exec ended.
struct mid_command {
  error_code ec;
  diagnostics diag;
  clock::time_point fault_at;
  std::chrono::milliseconds after_fault{0};
};

template <class Fault>
asio::awaitable<void> fault_after_start(Fault& fault, mid_command& out) {
  asio::steady_timer timer(co_await asio::this_coro::executor, 500ms);
  co_await timer.async_wait(asio::use_awaitable);
  fault();
  out.fault_at = clock::now();
}

asio::awaitable<void> sleep_on(ssh_harness& t, ssh_session& session, mid_command& out) {
  auto r = co_await run_command(t.trace.root(), session, "sleep 60", out.diag);
  out.ec = r ? error_code{} : r.error();
  out.after_fault = since(out.fault_at);
}

template <class Fault>
asio::awaitable<void> run_with_fault(ssh_harness& t, const test::sshd_server& server, Fault& fault, mid_command& out) {
  auto session = co_await t.connect(server, out.diag);
  if (!session) {
    out.ec = session.error();
    co_return;
  }
  std::vector<asio::awaitable<void>> tasks;
  tasks.push_back(sleep_on(t, **session, out));
  tasks.push_back(fault_after_start(fault, out));
  co_await run_all(std::move(tasks));
}

TEST_F(ssh_failures, a_server_killed_mid_command_fails_it_at_once) {
  auto kill = [this] { server.kill_all(); };
  mid_command m;
  run(run_with_fault(*this, server, kill, m));
  EXPECT_EQ(m.ec, make_error_code(errc::connection_lost)) << m.diag.message;
  EXPECT_LT(m.after_fault, 3s);
  EXPECT_TRUE(mentions(m.diag.message, "node node-1 (127.0.0.1:")) << m.diag.message;
  std::cout << m.diag.message << " (" << m.after_fault.count() << " ms after the kill)\n";
}

TEST_F(ssh_failures, a_peer_that_vanishes_mid_command_is_declared_gone_after_the_alive_timeout) {
  options.settings.keepalive_interval = 200ms;
  options.settings.alive_timeout = 1500ms;
  auto freeze = [this] { server.freeze(); };
  mid_command m;
  run(run_with_fault(*this, server, freeze, m));
  server.thaw();
  EXPECT_EQ(m.ec, make_error_code(errc::peer_unresponsive)) << m.diag.message;
  EXPECT_GE(m.after_fault, 1200ms);
  EXPECT_LT(m.after_fault, 4s);
  EXPECT_TRUE(mentions(m.diag.message, "ssh.alive_timeout")) << m.diag.message;
  EXPECT_TRUE(mentions(m.diag.message, "node-1")) << m.diag.message;
}

TEST_F(ssh_failures, keepalives_keep_a_quiet_command_alive) {
  options.settings.keepalive_interval = 100ms;
  options.settings.alive_timeout = 600ms;
  diagnostics diag;
  auto r = run([](ssh_failures& t, diagnostics& d) -> asio::awaitable<result<command_output>> {
    auto session = co_await t.connect(t.server, d);
    if (!session) co_return session.error();
    co_return co_await run_command(t.trace.root(), **session, "sleep 2; echo still here", d);
  }(*this, diag));
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->out, "still here\n");
}

// The `sleep` processes of the server whose arguments hold `token`.
std::vector<pid_t> sleeps_with(const test::sshd_server& server, const std::string& token) {
  std::vector<pid_t> out;
  for (const pid_t pid : server.processes()) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.rfind(std::string("sleep\0", 6), 0) == 0 && cmdline.find(token) != std::string::npos)
      out.push_back(pid);
  }
  return out;
}

struct cancelled_run {
  error_code ec;
  diagnostics diag;
  std::size_t running_before = 0;  // sleeps of the command seen just before the cancel
  std::chrono::milliseconds took{0};
};

asio::awaitable<void> wait_then_count(const test::sshd_server& server, std::string token, std::size_t& seen) {
  asio::steady_timer timer(co_await asio::this_coro::executor, 800ms);
  co_await timer.async_wait(asio::use_awaitable);
  seen = sleeps_with(server, token).size();
}

asio::awaitable<void> run_until_cancelled(ssh_harness& t, ssh_session& session, std::string command,
                                          cancelled_run& out) {
  const auto start = clock::now();
  auto r = co_await run_command(t.trace.root(), session, std::move(command), out.diag);
  out.ec = r ? error_code{} : r.error();
  out.took = since(start);
}

asio::awaitable<void> cancel_after_start(ssh_failures& t, std::string command, std::string token,
                                         cancelled_run& out) {
  auto session = co_await t.connect(t.server, out.diag);
  if (!session) {
    out.ec = session.error();
    co_return;
  }
  // The timer wins, `||` cancels the command and waits for it to wind down.
  auto command_run = run_until_cancelled(t, **session, std::move(command), out);
  auto timeout = wait_then_count(t.server, std::move(token), out.running_before);
  co_await (std::move(command_run) || std::move(timeout));
}

TEST_F(ssh_failures, cancelling_a_command_kills_its_remote_process_group) {
  // A pipeline and a background job: all of them in the command's process group.
  const std::string token = "987.6543";
  const auto command = fmt::format("sleep {0}1 & sleep {0}2 | cat; wait", token);
  cancelled_run c;
  run(cancel_after_start(*this, command, token, c));
  EXPECT_EQ(c.running_before, 2u) << "both sleeps should have run before the cancel";
  EXPECT_EQ(c.ec, asio::error::operation_aborted) << c.diag.message;
  EXPECT_TRUE(sleeps_with(server, token).empty()) << "a remote sleep survived the cancel";
  EXPECT_LT(c.took, 3s);
  const auto text = trace_text();
  EXPECT_TRUE(mentions(text, test::quoted(action_types::ssh::kill))) << text;
  EXPECT_TRUE(mentions(text, "\"cancelled\"")) << text;
}

asio::awaitable<void> exec_until_cancelled(ssh_harness& t, ssh_session& session, std::string command,
                                           collect_sink& sink, cancelled_run& out) {
  const exec_request request{std::move(command), nullptr, &sink};
  auto r = co_await exec(t.trace.root(), session, request, out.diag);
  out.ec = r ? error_code{} : r.error();
}

asio::awaitable<void> cancel_into_sink(ssh_failures& t, std::string command, std::string token, collect_sink& sink,
                                       cancelled_run& out) {
  auto session = co_await t.connect(t.server, out.diag);
  if (!session) {
    out.ec = session.error();
    co_return;
  }
  auto command_run = exec_until_cancelled(t, **session, std::move(command), sink, out);
  auto timeout = wait_then_count(t.server, std::move(token), out.running_before);
  co_await (std::move(command_run) || std::move(timeout));
}

// What a cancelled command prints while it is being stopped reaches the sink: the node program answers
// TERM by ending its actions, and those lines close its part of the trace.
TEST_F(ssh_failures, what_a_cancelled_command_prints_on_its_term_still_reaches_the_sink) {
  const std::string token = "765.4321";
  const auto command = fmt::format("trap 'echo goodbye; exit 3' TERM; echo hello; sleep {}1 & wait", token);
  collect_sink sink(1 << 20);
  cancelled_run c;
  run(cancel_into_sink(*this, command, token, sink, c));
  EXPECT_EQ(c.running_before, 1u);
  EXPECT_EQ(c.ec, asio::error::operation_aborted) << c.diag.message;
  EXPECT_EQ(sink.out, "hello\ngoodbye\n");
  EXPECT_TRUE(sleeps_with(server, token).empty()) << "the remote sleep survived the cancel";
}

TEST_F(ssh_failures, a_command_that_ignores_term_is_killed_after_the_grace) {
  options.settings.kill_grace = 1s;
  const std::string token = "876.5432";
  // Ignored signals are inherited: neither the shell nor its sleep hears TERM.
  const auto command = fmt::format("trap '' TERM; sleep {}1; echo survived", token);
  cancelled_run c;
  run(cancel_after_start(*this, command, token, c));
  EXPECT_EQ(c.running_before, 1u);
  EXPECT_EQ(c.ec, asio::error::operation_aborted) << c.diag.message;
  EXPECT_TRUE(sleeps_with(server, token).empty()) << "the remote sleep survived KILL";
  EXPECT_GE(c.took, 800ms + 900ms);  // the cancel, then the grace
  EXPECT_LT(c.took, 5s);
}

TEST_F(ssh_failures, an_idle_session_is_closed_after_the_idle_timeout) {
  options.settings.idle_timeout = 400ms;
  diagnostics diag;
  auto r = run([](ssh_failures& t, diagnostics& d) -> asio::awaitable<std::pair<bool, error_code>> {
    auto session = co_await t.connect(t.server, d);
    if (!session) co_return std::pair{false, session.error()};
    auto first = co_await run_command(t.trace.root(), **session, "sleep 0.6; echo busy is not idle", d);
    const bool first_ok = first && first->out == "busy is not idle\n";
    asio::steady_timer timer(co_await asio::this_coro::executor, 700ms);
    co_await timer.async_wait(asio::use_awaitable);
    auto second = co_await run_command(t.trace.root(), **session, "true", d);
    co_return std::pair{first_ok && (*session)->is_open() == false, second ? error_code{} : second.error()};
  }(*this, diag));
  EXPECT_TRUE(r.first) << "a running command must keep the session open, and idleness close it";
  EXPECT_EQ(r.second, make_error_code(errc::session_closed)) << diag.message;
  EXPECT_TRUE(mentions(diag.message, "ssh.idle_timeout")) << diag.message;
}

TEST_F(ssh_failures, ssh_agent_is_the_fallback_when_the_key_is_refused) {
  // ferry's key is refused (another identity is configured); the agent holds an authorized key.
  const auto other = dir / "other_key";
  const auto agent_key = dir / "agent_key";
  ASSERT_EQ(test::run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other.string()}).exit_code, 0);
  ASSERT_EQ(test::run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", agent_key.string()}).exit_code, 0);
  server.authorize(test::read_file(agent_key.string() + ".pub"));
  const auto socket = (dir / "agent.sock").string();
  auto agent = test::spawn({"ssh-agent", "-D", "-a", socket});
  for (int i = 0; i < 200 && !std::filesystem::exists(socket); ++i) std::this_thread::sleep_for(10ms);
  test::process_options with_agent;
  with_agent.env["SSH_AUTH_SOCK"] = socket;
  ASSERT_EQ(test::run({"ssh-add", agent_key.string()}, with_agent).exit_code, 0);

  options.settings.identity_file = other.string();
  const char* saved = std::getenv("SSH_AUTH_SOCK");
  const std::string saved_value = saved ? saved : "";
  ::setenv("SSH_AUTH_SOCK", socket.c_str(), 1);
  diagnostics diag;
  const auto ec = run(connect_only(*this, server, "node-1", diag));
  if (saved)
    ::setenv("SSH_AUTH_SOCK", saved_value.c_str(), 1);
  else
    ::unsetenv("SSH_AUTH_SOCK");
  agent->signal(SIGTERM);
  agent->wait();
  EXPECT_FALSE(ec) << diag.message;
  EXPECT_TRUE(mentions(trace_text(), "\"method\":\"agent\"")) << trace_text();
}

}  // namespace
}  // namespace ferry::net
