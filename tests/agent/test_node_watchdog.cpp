// The node side of the idle watchdog against a real sshd: the activity wrapper keeps exit statuses,
// signals, output and arguments, and its marker counts exactly while the command runs, also when ferry
// kills the command's process group; the watchdog starts once, is replaced when its settings change, is
// stopped for a pinned node, runs its stop command when the node is idle and not while a command runs,
// and removes the markers of commands that ended.
#include "agent/provide/node_watchdog.hpp"

#include "agent/error.hpp"
#include "net/shell_quote.hpp"
#include "net/ssh_node_link.hpp"

#include "../net/ssh_harness.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

namespace ferry::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using net::command_output;

class node_watchdog : public net::ssh_server_test {
 public:
  fs::path state() const { return dir / "node-state"; }
  static constexpr std::string_view stale_marker = "2147483646";  // above any pid_max: never a process
  watchdog_paths paths() const { return watchdog_paths::at(state()); }

  std::vector<std::string> markers() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state() / "busy", ec)) out.push_back(e.path().filename().string());
    return out;
  }

  // Markers whose process still runs: the server's processes by the pids they have in its namespace
  // (the last field of NSpid), which is what $$ said there.
  std::vector<std::string> live_markers() const {
    std::set<std::string> running;
    for (const pid_t pid : server.processes()) {
      const auto status = test::read_file(fmt::format("/proc/{}/status", pid));
      const auto at = status.find("\nNSpid:");
      if (at == std::string::npos || status.find("\nState:\tZ") != std::string::npos) continue;
      const auto line = status.substr(at + 1, status.find('\n', at + 1) - at - 1);
      running.insert(line.substr(line.find_last_of(" \t") + 1));
    }
    std::vector<std::string> out;
    for (const auto& m : markers())
      if (running.contains(m)) out.push_back(m);
    return out;
  }
  bool live_marker() const { return !live_markers().empty(); }

  // The server's processes running the watchdog (zombies left out).
  int watchdogs() const {
    int n = 0;
    for (const pid_t pid : server.processes()) {
      const auto stat = test::read_file(fmt::format("/proc/{}/stat", pid));
      if (stat.empty() || stat.substr(stat.rfind(')') + 2, 1) == "Z") continue;
      if (test::read_file(fmt::format("/proc/{}/cmdline", pid)).find("watchdog-loop") != std::string::npos) ++n;
    }
    return n;
  }

  std::string watchdog_pid() const { return test::read_file(state() / "watchdog.pid"); }

  provision::node node() const {
    provision::node n;
    n.id = "node-1";
    n.name = "node-1";
    return n;
  }
};

// Waits (polling, bounded) until `done` holds; false when it never did.
template <class F>
bool eventually(F done, std::chrono::milliseconds limit = 60s) {
  for (auto waited = 0ms; waited < limit; waited += 50ms) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

asio::awaitable<result<std::vector<command_output>>> run_each(node_watchdog& t, std::vector<std::string> commands,
                                                              diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  std::vector<command_output> out;
  for (auto& c : commands) {
    auto r = co_await net::run_command(t.trace.root(), **session, activity_wrapper(c, t.paths()), diag);
    if (!r) co_return r.error();
    out.push_back(std::move(*r));
  }
  co_return out;
}

TEST_F(node_watchdog, the_wrapper_keeps_exit_statuses_signals_and_output_and_leaves_no_live_marker) {
  diagnostics diag;
  const auto printf_argv = net::quote_argv({"printf", "[%s]", "a b", "it's", "$(id)", "*", ""});
  const auto marker = net::shell_quote((state() / "busy").string()) + "/$$";
  auto r = run(run_each(*this,
                        {"exit 3", "kill -TERM $$", "kill -KILL $$", "echo out; echo err >&2", printf_argv,
                         "test -e " + marker + " && echo marked"},
                        diag));
  ASSERT_TRUE(r) << diag.message << server.log();
  ASSERT_EQ(r->size(), 6u);
  EXPECT_EQ((*r)[0].exit.status, 3);
  EXPECT_FALSE((*r)[1].exit.status);
  EXPECT_EQ((*r)[1].exit.signal, "TERM");
  EXPECT_EQ((*r)[2].exit.signal, "KILL");
  EXPECT_EQ((*r)[3].out, "out\n");
  EXPECT_EQ((*r)[3].err, "err\n");
  EXPECT_EQ((*r)[3].exit.status, 0);
  EXPECT_EQ((*r)[4].out, "[a b][it's][$(id)][*][]");
  // While a command runs, its marker names the command's own shell.
  EXPECT_EQ((*r)[5].out, "marked\n");
  EXPECT_EQ(markers().size(), 6u) << "one per command";
  // Once they ended, none counts (the watchdog removes them: see below).
  EXPECT_TRUE(live_markers().empty()) << fmt::format("{}", fmt::join(live_markers(), " "));
  EXPECT_TRUE(fs::exists(state() / "last-used"));
}

// Cancels a wrapped `sleep` once its marker is there: ferry's TERM to the process group ends the sleep,
// and with it what the marker names.
asio::awaitable<error_code> cancel_when_busy(node_watchdog& t, diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  auto command = net::run_command(t.trace.root(), **session, activity_wrapper("sleep 987.5", t.paths()), diag);
  auto busy = [](node_watchdog& w) -> asio::awaitable<void> {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (int i = 0; i < 1200 && !w.live_marker(); ++i) {
      timer.expires_after(50ms);
      co_await timer.async_wait(asio::use_awaitable);
    }
  }(t);
  auto raced = co_await (std::move(command) || std::move(busy));
  if (raced.index() == 0) co_return std::get<0>(raced) ? error_code() : std::get<0>(raced).error();
  co_return asio::error::operation_aborted;
}

TEST_F(node_watchdog, a_cancelled_wrapped_command_is_killed_and_its_marker_no_longer_counts) {
  diagnostics diag;
  const auto ec = run(cancel_when_busy(*this, diag));
  EXPECT_EQ(ec, asio::error::operation_aborted) << diag.message;
  for (const pid_t pid : server.processes())
    EXPECT_EQ(test::read_file(fmt::format("/proc/{}/cmdline", pid)).find("987.5"), std::string::npos);
  EXPECT_EQ(markers().size(), 1u);
  EXPECT_TRUE(live_markers().empty()) << fmt::format("{}", fmt::join(live_markers(), " "));
}

asio::awaitable<result<void>> install(node_watchdog& t, provision::node n, std::string stop, watchdog_settings s,
                                      diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  net::ssh_node_link link(*session);
  co_return co_await install_watchdog(t.trace.root(), link, n, stop, s, diag);
}

TEST_F(node_watchdog, installs_once_replaces_on_new_settings_and_stops_for_a_pinned_node) {
  const watchdog_settings hour{1h, 5s, paths(), FERRY_NODE_PROGRAM};
  const std::string stop = "true";
  diagnostics diag;
  ASSERT_TRUE(run(install(*this, node(), stop, hour, diag))) << diag.message;
  const auto first = watchdog_pid();
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(eventually([&] { return watchdogs() == 1; }));
  // The same again: left alone.
  ASSERT_TRUE(run(install(*this, node(), stop, hour, diag))) << diag.message;
  EXPECT_EQ(watchdog_pid(), first);
  EXPECT_EQ(watchdogs(), 1);
  // Other settings: the old one goes, a new one runs.
  const watchdog_settings two_hours{2h, 5s, paths(), FERRY_NODE_PROGRAM};
  ASSERT_TRUE(run(install(*this, node(), stop, two_hours, diag))) << diag.message;
  EXPECT_NE(watchdog_pid(), first);
  EXPECT_TRUE(eventually([&] { return watchdogs() == 1; })) << watchdogs();
  EXPECT_NE(test::read_file(state() / "watchdog.json").find(R"("idle_timeout_ms":7200000)"), std::string::npos)
      << test::read_file(state() / "watchdog.json");
  // Pinned: none.
  auto pinned = node();
  pin(pinned);
  ASSERT_TRUE(run(install(*this, pinned, stop, two_hours, diag))) << diag.message;
  EXPECT_TRUE(eventually([&] { return watchdogs() == 0; })) << watchdogs();
  EXPECT_FALSE(fs::exists(state() / "watchdog.pid"));
  EXPECT_NE(test::read_file(state() / "watchdog.log").find("ended by SIGTERM"), std::string::npos)
      << test::read_file(state() / "watchdog.log");
  // An idle timeout of 0 and an empty stop command mean none too (and nothing to stop is fine).
  const watchdog_settings never{0ms, 5s, paths(), FERRY_NODE_PROGRAM};
  EXPECT_TRUE(run(install(*this, node(), stop, never, diag))) << diag.message;
  EXPECT_TRUE(run(install(*this, node(), "", hour, diag))) << diag.message;
  EXPECT_EQ(watchdogs(), 0);
}

// Starts a long wrapped command; once its marker is there, installs the watchdog. The command ages
// last-used by an hour, so only its marker keeps the node from stopping, and it says whether the stop
// command ran meanwhile.
asio::awaitable<result<command_output>> busy_while_watched(node_watchdog& t, std::string stop, watchdog_settings s,
                                                          fs::path stopped, diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  const auto command = fmt::format("touch -d '1 hour ago' {} && sleep 3 && test ! -e {}",
                                   net::shell_quote((t.state() / "last-used").string()),
                                   net::shell_quote(stopped.string()));
  auto busy = net::run_command(t.trace.root(), **session, activity_wrapper(command, t.paths()), diag);
  net::ssh_node_link link(*session);
  auto then_install = [](node_watchdog& w, net::node_link& on, std::string stop_command, watchdog_settings with,
                         diagnostics& d) -> asio::awaitable<result<void>> {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (int i = 0; i < 3000 && !w.live_marker(); ++i) {
      timer.expires_after(20ms);
      co_await timer.async_wait(asio::use_awaitable);
    }
    if (!w.live_marker()) {
      d.set("the running command left no marker");
      co_return make_error_code(errc::watchdog_failed);
    }
    co_return co_await install_watchdog(w.trace.root(), on, w.node(), stop_command, with, d);
  }(t, link, std::move(stop), s, diag);
  auto both = co_await (std::move(busy) && std::move(then_install));
  if (!std::get<1>(both)) co_return std::get<1>(both).error();
  co_return std::get<0>(both);
}

TEST_F(node_watchdog, an_idle_node_runs_its_stop_command_and_a_busy_one_does_not) {
  const auto stopped = dir / "stopped";
  const auto stop = fmt::format("printf '%s\\n' \"$FERRY_STOP_REASON\" > {}", net::shell_quote(stopped.string()));
  const watchdog_settings fast{1s, 100ms, paths(), FERRY_NODE_PROGRAM};
  // A marker whose process is gone does not keep the node busy.
  fs::create_directories(state() / "busy");
  std::ofstream(state() / "busy" / stale_marker).flush();
  diagnostics diag;
  auto r = run(busy_while_watched(*this, stop, fast, stopped, diag));
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->exit.status, 0) << "the node stopped while a command ran: " << test::read_file(stopped);
  // Idle now: it stops.
  ASSERT_TRUE(eventually([&] { return !test::read_file(stopped).empty(); }))
      << test::read_file(state() / "watchdog.log");
  EXPECT_NE(test::read_file(stopped).find("stopped itself: idle for"), std::string::npos) << test::read_file(stopped);
  // The watchdog logs why, runs the command, notes that it is done and ends.
  EXPECT_TRUE(eventually([&] { return watchdogs() == 0; }));
  const auto log = test::read_file(state() / "watchdog.log");
  EXPECT_NE(log.find("stopping the node"), std::string::npos) << log;
  EXPECT_NE(log.find("stop command done"), std::string::npos) << log;
  // Every marker, the stale one from before and the command's, is gone.
  EXPECT_TRUE(markers().empty()) << fmt::format("{}", fmt::join(markers(), " "));
}

// The wrapper's cost per command: 100 `true` plain and 100 wrapped on one session, taken in turns so that
// whatever else the machine does weighs on both alike, after a round of each to warm up. Printed, not
// asserted on.
TEST_F(node_watchdog, the_wrapper_costs_little_per_command) {
  constexpr int runs = 100;
  diagnostics diag;
  auto times = run([](node_watchdog& t, diagnostics& d) -> asio::awaitable<result<std::pair<double, double>>> {
    auto session = co_await t.connect(t.server, d);
    if (!session) co_return session.error();
    const std::string commands[2] = {"true", activity_wrapper("true", t.paths())};
    double took[2] = {0, 0};
    for (int i = 0; i < 2 * runs + 2; ++i) {
      const int wrapped = i % 2;
      const auto start = std::chrono::steady_clock::now();
      auto r = co_await net::run_command(t.trace.root(), **session, commands[wrapped], d);
      if (!r) co_return r.error();
      if (!r->exit.success()) co_return make_error_code(errc::watchdog_failed);
      if (i >= 2) took[wrapped] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    co_return std::pair{took[0] / runs, took[1] / runs};
  }(*this, diag));
  ASSERT_TRUE(times) << diag.message;
  std::printf("per command over SSH, mean of %d: plain %.2f ms, wrapped %.2f ms (+%.2f ms)\n", runs, times->first,
              times->second, times->second - times->first);
  EXPECT_TRUE(live_markers().empty());
}

}  // namespace
}  // namespace ferry::agent
