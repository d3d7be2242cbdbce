// Readiness: the schedule and the state machine on their own (exact times, no clock; faults at every step
// by the sans-io harness, tests/support/sans_io_harness.hpp), then the async shell
// against a scripted provider and a fake SSH greeter on loopback. Real sshd nodes are in test_local_*.
#include "provision/error.hpp"
#include "provision/poll_schedule.hpp"
#include "provision/readiness.hpp"
#include "provision/readiness_core.hpp"
#include "provision/ssh_banner.hpp"

#include "io_runner.hpp"
#include "support/loopback_listener.hpp"
#include "support/sans_io_harness.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_root.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <sstream>
#include <thread>

namespace ferry::provision {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
using test::run_io;
using test::temp_dir;

// ---- the schedule ----------------------------------------------------------------------------------------

const poll_policy policy{50ms, 400ms, 1000ms};

TEST(poll_schedule, nominal_wait_doubles_from_the_first_interval_up_to_the_cap) {
  std::vector<long> waits;
  for (int n = 1; n <= 7; ++n)
    waits.push_back(
        std::chrono::duration_cast<std::chrono::milliseconds>(poll_schedule::nominal_wait(policy, n)).count());
  EXPECT_EQ(waits, (std::vector<long>{50, 100, 200, 400, 400, 400, 400}));
  EXPECT_EQ(poll_schedule::nominal_wait(policy, 1000), 400ms);  // no overflow far out
}

TEST(poll_schedule, without_jitter_the_waits_are_exact_and_jitter_only_shortens_them_by_up_to_half) {
  const auto t0 = clock::time_point{} + 1h;
  poll_schedule s(policy, t0);
  EXPECT_EQ(s.deadline(), t0 + 1000ms);
  EXPECT_EQ(s.after_failure(t0, 0.0), t0 + 50ms);  // the short first interval
  EXPECT_EQ(s.after_failure(t0 + 50ms, 0.0), t0 + 150ms);
  EXPECT_EQ(s.after_failure(t0 + 150ms, 0.5), t0 + 150ms + 150ms);  // 200ms less a quarter
  EXPECT_EQ(s.failures(), 3);
  s.restart();
  EXPECT_EQ(s.after_failure(t0 + 300ms, 0.5), t0 + 300ms + 37500us);  // the first interval again
}

TEST(poll_schedule, the_last_attempt_is_at_the_deadline_and_none_after_it) {
  const auto t0 = clock::time_point{} + 1h;
  poll_schedule s(policy, t0);
  EXPECT_EQ(s.after_failure(t0 + 990ms, 0.0), t0 + 1000ms);  // clipped to the deadline, not dropped
  EXPECT_EQ(s.after_failure(t0 + 1000ms, 0.0), std::nullopt);
  EXPECT_EQ(s.after_failure(t0 + 5000ms, 0.0), std::nullopt);
}

// ---- the state machine -------------------------------------------------------------------------------------

class core : public ::testing::Test {
 protected:
  const clock::time_point t0 = clock::time_point{} + 1h;
  readiness_core c{policy, t0};
};

TEST_F(core, polls_until_running_then_tries_ssh_at_once) {
  EXPECT_EQ(c.stage(), readiness_stage::running);
  EXPECT_EQ(c.next(), readiness_step::describe);
  EXPECT_EQ(c.next_at(), t0);
  c.described(node_state::pending, t0, 0);
  EXPECT_EQ(c.next_at(), t0 + 50ms);
  c.described(node_state::unknown, t0 + 50ms, 0);
  EXPECT_EQ(c.next_at(), t0 + 150ms);
  EXPECT_EQ(c.attempts(), 2);
  c.described(node_state::running, t0 + 150ms, 0);
  EXPECT_EQ(c.stage(), readiness_stage::ssh);
  EXPECT_EQ(c.next(), readiness_step::ssh_attempt);
  EXPECT_EQ(c.next_at(), t0 + 150ms);
  EXPECT_EQ(c.attempts(), 0);
}

TEST_F(core, a_failed_ssh_attempt_waits_from_the_first_interval_again_and_describes_before_the_next) {
  c.described(node_state::pending, t0, 0);
  c.described(node_state::pending, t0 + 50ms, 0);
  c.described(node_state::running, t0 + 150ms, 0);
  c.ssh_failed(t0 + 160ms, 0);
  EXPECT_EQ(c.next(), readiness_step::describe);
  EXPECT_EQ(c.next_at(), t0 + 210ms);  // 50ms: the ssh stage's own first wait
  c.described(node_state::running, t0 + 211ms, 0);
  EXPECT_EQ(c.next(), readiness_step::ssh_attempt);
  EXPECT_EQ(c.next_at(), t0 + 211ms);
  c.ssh_failed(t0 + 220ms, 0);
  EXPECT_EQ(c.next_at(), t0 + 320ms);  // 100ms
  c.described(node_state::pending, t0 + 320ms, 0);  // a reboot: keep waiting, still describing
  EXPECT_EQ(c.next(), readiness_step::describe);
  EXPECT_EQ(c.next_at(), t0 + 520ms);
  c.described(node_state::running, t0 + 520ms, 0);
  c.ssh_succeeded();
  EXPECT_EQ(c.stage(), readiness_stage::ready);
  EXPECT_EQ(c.next(), readiness_step::finish);
  EXPECT_EQ(c.attempts(), 3);
}

TEST_F(core, a_node_that_ends_fails_at_once_in_either_stage) {
  for (auto gone : {node_state::terminated, node_state::stopped, node_state::stopping}) {
    readiness_core r(policy, t0);
    r.described(gone, t0, 0);
    EXPECT_EQ(r.stage(), readiness_stage::failed);
    EXPECT_EQ(r.failure(), errc::node_terminated);
  }
  c.described(node_state::running, t0, 0);
  c.ssh_failed(t0 + 10ms, 0);
  c.described(node_state::terminated, t0 + 60ms, 0);
  EXPECT_EQ(c.stage(), readiness_stage::failed);
  EXPECT_EQ(c.failure(), errc::node_terminated);
}

TEST_F(core, the_deadline_fails_with_the_stage_it_was_reached_in) {
  c.described(node_state::pending, t0 + 990ms, 0);
  EXPECT_EQ(c.next_at(), t0 + 1000ms);
  c.describe_failed(t0 + 1000ms, 0);
  EXPECT_EQ(c.stage(), readiness_stage::failed);
  EXPECT_EQ(c.failure(), errc::not_running_in_time);

  readiness_core s(policy, t0);
  s.skip_running(t0);
  EXPECT_EQ(s.next(), readiness_step::ssh_attempt);
  s.ssh_failed(t0 + 995ms, 0);
  EXPECT_EQ(s.next_at(), t0 + 1000ms);
  s.described(node_state::running, t0 + 1000ms, 0);
  s.ssh_failed(t0 + 1001ms, 0);
  EXPECT_EQ(s.stage(), readiness_stage::failed);
  EXPECT_EQ(s.failure(), errc::ssh_not_ready_in_time);
}

// ---- the state machine with a fault at every step ----------------------------------------------------------

// Plays the shell for the sans-io harness: each step waits until next_at() and answers the step the core asks
// for, from the provider's scripted states and the scripted SSH attempts (the last of each repeats). The
// harness's error is a describe or an SSH attempt that fails, which the core retries; a cancellation ends
// the wait, and there is nothing to clean up.
class readiness_sim {
 public:
  using core_type = readiness_core;
  static constexpr bool ends_on_error = false;

  readiness_sim(const poll_policy& p, std::vector<node_state> states, std::vector<bool> logins)
      : core_(p, start), states_(std::move(states)), logins_(std::move(logins)) {}

  readiness_core& core() { return core_; }
  const readiness_core& core() const { return core_; }
  static bool is_finish(readiness_step s) { return s == readiness_step::finish; }
  void started(readiness_step s) {
    if (s != readiness_step::finish && core_.next_at() < now_) problems_.push_back("a step due in the past");
  }
  bool advance(int, bool fail) {
    now_ = std::max(now_, core_.next_at()) + 1ms;  // the shell sleeps until then; the step takes a while
    switch (core_.next()) {
      case readiness_step::describe:
        if (fail) {
          core_.describe_failed(now_, 0.5);
        } else {
          core_.described(states_[std::min(described_++, states_.size() - 1)], now_, 0.5);
        }
        return true;
      case readiness_step::ssh_attempt:
        if (!fail && logins_[std::min(logins_tried_++, logins_.size() - 1)]) {
          core_.ssh_succeeded();
        } else {
          core_.ssh_failed(now_, 0.5);
        }
        return true;
      case readiness_step::finish:
        break;
    }
    return false;
  }
  void cancel(net::cancel_kind k) { core_.cancelled(k); }
  error_code error_at(int) const { return make_error_code(asio::error::timed_out); }
  bool settled() const { return core_.done(); }
  bool success_wins() const { return false; }
  error_code outcome_error() const {
    if (core_.cancellation()) return asio::error::operation_aborted;
    if (core_.stage() == readiness_stage::failed) return make_error_code(core_.failure());
    return {};
  }
  bool cleanup_owed() const { return false; }
  bool cleaned_up() const { return false; }
  const std::vector<std::string>& problems() const { return problems_; }

  static constexpr clock::time_point start = clock::time_point{} + 1h;

 private:
  readiness_core core_;
  std::vector<node_state> states_;
  std::vector<bool> logins_;
  std::size_t described_ = 0, logins_tried_ = 0;
  clock::time_point now_ = start;
  std::vector<std::string> problems_;
};

TEST(readiness_core_faults, a_fault_at_every_step_ends_the_wait_as_it_should) {
  const poll_policy roomy{50ms, 400ms, 60s};  // no deadline within reach: a failed step is retried
  struct wait_case {
    std::string name;
    poll_policy p;
    std::vector<node_state> states;
    std::vector<bool> logins;
    std::string ends;  // without a cancellation: "ready" or the failure
  };
  const std::vector<wait_case> cases = {
      {"ready", roomy, {node_state::pending, node_state::pending, node_state::running}, {false, true}, "ready"},
      {"terminated", roomy, {node_state::pending, node_state::running, node_state::terminated}, {false}, "failed"},
      {"never running", policy, {node_state::pending}, {true}, "failed"},
      {"never answering ssh", policy, {node_state::running}, {false}, "failed"},
  };
  int runs = 0;
  for (const auto& c : cases) {
    readiness_sim clean(c.p, c.states, c.logins);
    test::sans_io::run<readiness_sim> happy(clean, {});
    happy.play();
    EXPECT_EQ(happy.problems(), std::vector<std::string>{}) << c.name;
    EXPECT_EQ(to_string(clean.core().stage()), c.ends) << c.name;
    const auto report = test::sans_io::every_fault(
        [&] { return readiness_sim(c.p, c.states, c.logins); }, {},
        [&](const readiness_sim& d, const test::sans_io::fault_plan& plan) {
          // Without a cancellation a failed step only delays the end: the same end, with the same failure.
          if (d.core().cancellation()) {
            EXPECT_EQ(d.core().stage(), readiness_stage::failed) << c.name << ": " << plan.describe();
            return;
          }
          EXPECT_EQ(d.core().stage(), clean.core().stage()) << c.name << ": " << plan.describe();
          EXPECT_EQ(d.core().failure(), clean.core().failure()) << c.name << ": " << plan.describe();
        });
    runs += report.runs;
    for (const auto& f : report.failures) ADD_FAILURE() << c.name << ": " << f;
  }
  EXPECT_GT(runs, 100);
}

TEST(ssh_banner, tells_ssh2_identifications_from_other_greetings) {
  EXPECT_TRUE(is_ssh2_banner("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3"));
  EXPECT_TRUE(is_ssh2_banner("SSH-1.99-Cisco-1.25"));
  EXPECT_FALSE(is_ssh2_banner("SSH-1.5-old"));
  EXPECT_FALSE(is_ssh2_banner("HTTP/1.1 400 Bad Request"));
}

// ---- the async shell -------------------------------------------------------------------------------------

// Answers each TCP connection on 127.0.0.1 with `greeting`, then closes it.
class greeter {
 public:
  explicit greeter(std::string greeting) : greeting_(std::move(greeting)) {
    const auto listener = test::listen_on_loopback("greeter");
    fd_ = listener.fd;
    port_ = listener.port;
    thread_ = std::thread([this] { serve(); });
  }
  ~greeter() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::uint16_t port() const { return port_; }
  int connections() const { return connections_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++connections_;
      (void)!::send(c, greeting_.data(), greeting_.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  std::string greeting_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// Says the states in `script` in turn (repeating the last), or fails with `error` when set.
class scripted_provider final : public provider {
 public:
  explicit scripted_provider(std::vector<node_state> script) : script_(std::move(script)) {}
  std::string_view name() const override { return "scripted"; }
  asio::awaitable<result<std::vector<node>>> create(tracing::action&, const node_spec&, diagnostics&) override {
    co_return std::vector<node>{};
  }
  asio::awaitable<result<node>> describe(tracing::action&, const node& n, diagnostics& diag) override {
    if (error) {
      diag.set("no such node " + n.id);
      co_return error;
    }
    node out = n;
    const auto i = std::min(describes[n.id]++, static_cast<int>(script_.size()) - 1);
    out.state = script_[static_cast<std::size_t>(i)];
    if (out.state == node_state::terminated) out.details["state_reason"] = "scripted end";
    co_return out;
  }
  asio::awaitable<result<void>> terminate(tracing::action&, const node&, diagnostics&) override {
    co_return result<void>{};
  }
  asio::awaitable<result<std::vector<node>>> list(tracing::action&, diagnostics&) override {
    co_return std::vector<node>{};
  }

  std::map<std::string, int> describes;
  error_code error;

 private:
  std::vector<node_state> script_;
};

node node_at(std::string id, std::uint16_t port) {
  node n;
  n.id = std::move(id);
  n.name = "node-" + n.id;
  n.provider = "scripted";
  n.host = "127.0.0.1";
  n.port = port;
  n.user = "root";
  return n;
}

// A login that fails `failures` times, then succeeds; `hang` makes every attempt wait (for cancellation).
struct fake_login {
  int failures = 0;
  bool hang = false;
  int calls = 0;
};

asio::awaitable<result<void>> fake_login_attempt(fake_login& f, diagnostics& diag) {
  ++f.calls;
  if (f.hang) {
    asio::steady_timer t(co_await asio::this_coro::executor, 1h);
    error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return ec;
  }
  if (f.calls <= f.failures) {
    diag.set("permission denied (scripted)");
    co_return make_error_code(sys::errc::permission_denied);
  }
  co_return result<void>{};
}

login_check login_of(fake_login& f) {
  return [&f](tracing::action&, const node&, diagnostics& diag) { return fake_login_attempt(f, diag); };
}

// The finished actions of a type in the trace, as JSON objects.
std::vector<boost::json::object> finished(const std::string& trace, std::string_view type) {
  std::vector<boost::json::object> out;
  std::istringstream in(trace);
  for (std::string line; std::getline(in, line);) {
    const auto v = boost::json::parse(line);
    const auto& o = v.get_object();
    const auto* t = o.if_contains("action_type");
    const auto* s = o.if_contains("action_status");
    if (t && s && t->get_string() == type && s->get_string() != "started") out.push_back(o);
  }
  return out;
}

class shell : public ::testing::Test {
 protected:
  readiness_options options(std::chrono::milliseconds timeout) const {
    readiness_options o;
    o.poll = {10ms, 40ms, timeout};
    o.attempt_timeout = 1s;
    o.max_parallel = 8;
    return o;
  }

  temp_dir dir;
  test::trace_root trace{dir / "trace.jsonl", "test:readiness"};
  diagnostics diag;
};

TEST_F(shell, waits_through_pending_then_greets_and_logs_in) {
  greeter g("SSH-2.0-OpenSSH_fake\r\n");
  scripted_provider p({node_state::pending, node_state::pending, node_state::running});
  fake_login login{.failures = 2};
  const auto n = node_at("a", g.port());
  const auto check = login_of(login);
  const auto o = options(10s);
  auto ready = run_io(wait_ready(trace.root(), p, n, check, o, diag));
  ASSERT_TRUE(ready) << diag.message;
  EXPECT_EQ(ready->state, node_state::running);
  EXPECT_EQ(login.calls, 3);
  EXPECT_EQ(g.connections(), 3);
  EXPECT_EQ(p.describes["a"], 3 + 2);  // 3 to see it run, then one before each retry

  const auto text = trace.flushed_text();
  const auto running = finished(text, action_types::readiness::wait_running);
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].at("attempts").as_int64(), 3);
  const auto ssh = finished(text, action_types::readiness::wait_ssh);
  ASSERT_EQ(ssh.size(), 1u);
  EXPECT_EQ(ssh[0].at("attempts").as_int64(), 3);
  EXPECT_EQ(finished(text, action_types::readiness::ssh_attempt).size(), 3u);
  const auto banners = finished(text, action_types::readiness::ssh_banner);
  ASSERT_EQ(banners.size(), 3u);
  EXPECT_EQ(banners[0].at("banner").as_string(), "SSH-2.0-OpenSSH_fake");
  EXPECT_EQ(finished(text, action_types::readiness::ssh_login).size(), 3u);
}

TEST_F(shell, a_terminated_node_fails_at_once_not_at_the_deadline) {
  scripted_provider p({node_state::pending, node_state::terminated});
  fake_login login;
  const auto n = node_at("gone", 1);
  const auto check = login_of(login);
  const auto o = options(30s);
  const auto start = clock::now();
  auto ready = run_io(wait_ready(trace.root(), p, n, check, o, diag));
  ASSERT_FALSE(ready);
  EXPECT_EQ(ready.error(), errc::node_terminated);
  EXPECT_LT(clock::now() - start, 2s);
  EXPECT_NE(diag.message.find("node-gone (gone)"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("scripted end"), std::string::npos) << diag.message;
}

TEST_F(shell, a_closed_port_fails_at_the_deadline_with_the_last_reason) {
  std::uint16_t closed = 0;
  {
    greeter g("");
    closed = g.port();
  }
  scripted_provider p({node_state::running});
  fake_login login;
  const auto n = node_at("closed", closed);
  const auto check = login_of(login);
  const auto o = options(400ms);
  const auto start = clock::now();
  auto ready = run_io(wait_ready(trace.root(), p, n, check, o, diag));
  const auto took = clock::now() - start;
  ASSERT_FALSE(ready);
  EXPECT_EQ(ready.error(), errc::ssh_not_ready_in_time);
  EXPECT_GE(took, 400ms);
  EXPECT_LT(took, 1500ms);
  EXPECT_NE(diag.message.find("refused"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("nodes.ready_timeout"), std::string::npos) << diag.message;
  EXPECT_EQ(login.calls, 0);
  const auto ssh = finished(trace.flushed_text(), action_types::readiness::wait_ssh);
  ASSERT_EQ(ssh.size(), 1u);
  EXPECT_EQ(ssh[0].at("action_status").as_string(), "failed");
  EXPECT_GE(ssh[0].at("attempts").as_int64(), 5);  // 10, 20, 40, 40... ms apart within 400 ms
}

TEST_F(shell, a_greeting_that_is_not_ssh_is_no_ssh) {
  greeter g("HTTP/1.0 400 Bad Request\r\n\r\n");
  scripted_provider p({node_state::running});
  fake_login login;
  const auto n = node_at("http", g.port());
  const auto check = login_of(login);
  const auto o = options(200ms);
  auto ready = run_io(wait_ready(trace.root(), p, n, check, o, diag));
  ASSERT_FALSE(ready);
  EXPECT_EQ(ready.error(), errc::ssh_not_ready_in_time);
  EXPECT_NE(diag.message.find("HTTP/1.0 400"), std::string::npos) << diag.message;
  EXPECT_EQ(login.calls, 0);
}

TEST_F(shell, a_hanging_login_is_cut_off_by_the_attempt_timeout) {
  greeter g("SSH-2.0-x\r\n");
  scripted_provider p({node_state::running});
  fake_login login{.hang = true};
  const auto n = node_at("hang", g.port());
  const auto check = login_of(login);
  auto o = options(600ms);
  o.attempt_timeout = 150ms;
  const auto start = clock::now();
  auto ready = run_io(wait_for_ssh(trace.root(), p, n, check, o, diag));
  ASSERT_FALSE(ready);
  EXPECT_EQ(ready.error(), errc::ssh_not_ready_in_time);
  EXPECT_LT(clock::now() - start, 1500ms);
  EXPECT_GE(login.calls, 2);
  EXPECT_NE(diag.message.find("login did not finish"), std::string::npos) << diag.message;
}

TEST_F(shell, a_describe_error_that_retrying_cannot_cure_fails_at_once) {
  scripted_provider p({node_state::pending});
  p.error = make_error_code(errc::node_not_found);
  const auto n = node_at("unknown", 1);
  const auto o = options(30s);
  auto running = run_io(wait_until_running(trace.root(), p, n, o, diag));
  ASSERT_FALSE(running);
  EXPECT_EQ(running.error(), errc::node_not_found);
  EXPECT_EQ(p.describes.size(), 0u);
  EXPECT_NE(diag.message.find("no such node unknown"), std::string::npos) << diag.message;
}

TEST_F(shell, wait_ready_all_reports_every_failed_node_by_name) {
  greeter g("SSH-2.0-x\r\n");
  scripted_provider p({node_state::running});
  scripted_provider dying({node_state::terminated});
  fake_login login;
  std::vector<node> nodes{node_at("a", g.port()), node_at("b", g.port()), node_at("c", g.port())};
  const auto check = login_of(login);
  auto o = options(5s);
  o.max_parallel = 2;
  auto all = run_io(wait_ready_all(trace.root(), p, nodes, check, o, diag));
  ASSERT_TRUE(all) << diag.message;
  EXPECT_EQ(all->size(), 3u);

  auto each = run_io(wait_ready_each(trace.root(), dying, nodes, check, o));
  ASSERT_EQ(each.size(), 3u);
  for (const auto& e : each) EXPECT_EQ(e.error, errc::node_terminated);
  auto failed = run_io(wait_ready_all(trace.root(), dying, nodes, check, o, diag));
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error(), errc::node_terminated);
  for (const auto* name : {"node-a (a)", "node-b (b)", "node-c (c)"})
    EXPECT_NE(diag.message.find(name), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("3 of 3 nodes"), std::string::npos) << diag.message;
}

}  // namespace
}  // namespace ferry::provision
