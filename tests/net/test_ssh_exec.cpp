// ferry's SSH sessions and exec channels against a real sshd: output, exit codes and signals, argv
// quoting, stdin, 100 MiB through one channel, 64 channels at once on one session, and channels that
// must not wait for each other.
#include "ssh_harness.hpp"

#include "net/async_event.hpp"
#include "net/digest.hpp"
#include "net/error.hpp"
#include "net/run_all.hpp"
#include "net/shell_quote.hpp"
#include "tracing/action_types.hpp"

#include "support/quoted.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <fstream>
#include <random>

namespace ferry::net {
namespace {

using namespace asio::experimental::awaitable_operators;
using ssh_exec = ssh_server_test;
using ssh_capped = ssh_harness;  // with a server of its own that caps channels
using clock = std::chrono::steady_clock;

asio::awaitable<result<command_output>> connect_and_run(ssh_exec& t, std::string command, diagnostics& diag,
                                                        std::string input = {}) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  co_return co_await run_command(t.trace.root(), **session, std::move(command), diag, input);
}

TEST_F(ssh_exec, runs_a_command_and_traces_connect_handshake_auth_and_exec) {
  diagnostics diag;
  auto r = run(connect_and_run(*this, "echo hello; echo oops >&2; echo $HOME", diag));
  ASSERT_TRUE(r) << diag.message << server.log();
  EXPECT_EQ(r->out, "hello\n" + server.home().string() + "\n");
  EXPECT_EQ(r->err, "oops\n");
  EXPECT_EQ(r->exit.status, 0);
  const auto text = trace_text();
  for (const auto& needle :
       {test::quoted(action_types::ssh::connect), test::quoted(action_types::ssh::handshake),
        test::quoted(action_types::ssh::host_key), test::quoted(action_types::ssh::auth),
        test::quoted(action_types::ssh::exec), std::string(R"("exit_status":0)"),
        std::string(R"("method":"publickey SHA256:)"), std::string(R"("status":"trusted on first use")"),
        std::string(R"("kex":"curve25519-sha256")")})
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
  // The private key never reaches the trace.
  const auto key = test::read_file(own_key_path(options.config_dir));
  const auto body = key.substr(key.find('\n') + 1, 40);
  EXPECT_EQ(text.find(body), std::string::npos);
}

TEST_F(ssh_exec, exit_codes_and_signals_come_back) {
  diagnostics diag;
  auto codes = run([](ssh_exec& t, diagnostics& d) -> asio::awaitable<result<std::vector<exit_info>>> {
    auto session = co_await t.connect(t.server, d);
    if (!session) co_return session.error();
    std::vector<exit_info> out;
    for (const auto* command : {"true", "exit 1", "exit 42", "kill -TERM $$", "kill -KILL $$"}) {
      auto r = co_await run_command(t.trace.root(), **session, command, d);
      if (!r) co_return r.error();
      out.push_back(r->exit);
    }
    co_return out;
  }(*this, diag));
  ASSERT_TRUE(codes) << diag.message;
  ASSERT_EQ(codes->size(), 5u);
  EXPECT_EQ((*codes)[0].status, 0);
  EXPECT_EQ((*codes)[1].status, 1);
  EXPECT_EQ((*codes)[2].status, 42);
  EXPECT_FALSE((*codes)[3].status);
  EXPECT_EQ((*codes)[3].signal, "TERM");
  EXPECT_EQ((*codes)[4].signal, "KILL");
  EXPECT_EQ((*codes)[3].describe(), "killed by signal TERM");
}

TEST_F(ssh_exec, arguments_arrive_byte_for_byte) {
  const std::vector<std::string> args = {
      "plain",       "with space",  "it's",          "\"double\"",  "$(touch /tmp/ferry-pwned)", "`id`",
      "*",           "/etc/*",      "back\\slash",   "new\nline",   "tab\there",                 "",
      "'",           "''",          "$HOME",         "a;b&c|d",     "-n",                        "~",
      "\x01\x7f\xff", "trailing\\", "{a,b}",         "!bang",       "%s%n"};
  std::filesystem::remove("/tmp/ferry-pwned");
  std::vector<std::string> argv{"printf", "%s\\0"};
  argv.insert(argv.end(), args.begin(), args.end());
  diagnostics diag;
  auto r = run(connect_and_run(*this, quote_argv(argv), diag));
  ASSERT_TRUE(r) << diag.message;
  ASSERT_EQ(r->exit.status, 0) << r->err;
  std::vector<std::string> back;
  for (std::size_t start = 0; start < r->out.size();) {
    const auto end = r->out.find('\0', start);
    back.push_back(r->out.substr(start, end - start));
    start = end + 1;
  }
  EXPECT_EQ(back, args);
  EXPECT_FALSE(std::filesystem::exists("/tmp/ferry-pwned"));
}

TEST_F(ssh_exec, stdin_round_trips) {
  std::string input(3 << 20, '\0');
  std::mt19937 rng(7);
  for (auto& c : input) c = static_cast<char>(rng());
  diagnostics diag;
  auto r = run(connect_and_run(*this, "cat", diag, input));
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->exit.status, 0);
  EXPECT_EQ(r->out.size(), input.size());
  EXPECT_TRUE(r->out == input);
  // A command that reads nothing still ends, whatever input was waiting for it.
  auto early = run(connect_and_run(*this, "exit 3", diag, input));
  ASSERT_TRUE(early) << diag.message;
  EXPECT_EQ(early->exit.status, 3);
}

// Counts and hashes what it is given, keeping nothing.
class hashing_sink final : public output_sink {
 public:
  asio::awaitable<error_code> write(output_stream stream, std::span<const char> bytes) override {
    if (stream == output_stream::err) {
      err.append(bytes.data(), bytes.size());
    } else {
      size += bytes.size();
      hash.update({bytes.data(), bytes.size()});
    }
    co_return error_code{};
  }
  std::uint64_t size = 0;
  sha256_stream hash;
  std::string err;
};

TEST_F(ssh_exec, a_hundred_mib_of_stdout_arrive_intact) {
  constexpr std::size_t size = 100u << 20;
  const auto file = dir / "big";
  {
    std::mt19937_64 rng(100);
    std::ofstream out(file, std::ios::binary);
    std::vector<std::uint64_t> block(1 << 16);
    for (std::size_t done = 0; done < size; done += block.size() * 8) {
      for (auto& v : block) v = rng();
      out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(block.size() * 8));
    }
  }
  sha256_stream expected;
  {
    std::ifstream in(file, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0)
      expected.update({buf.data(), static_cast<std::size_t>(in.gcount())});
  }
  hashing_sink sink;
  diagnostics diag;
  const auto started = clock::now();
  auto r = run([](ssh_exec& t, hashing_sink& s, std::string command,
                  diagnostics& d) -> asio::awaitable<result<exit_info>> {
    auto session = co_await t.connect(t.server, d);
    if (!session) co_return session.error();
    exec_request request{std::move(command), nullptr, &s};
    co_return co_await exec(t.trace.root(), **session, request, d);
  }(*this, sink, quote_argv({"cat", file.string()}), diag));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->status, 0) << sink.err;
  EXPECT_EQ(sink.size, size);
  EXPECT_EQ(to_hex(sink.hash.finish()), to_hex(expected.finish()));
  std::cout << "100 MiB through one channel in " << took.count() << " ms\n";
}

asio::awaitable<void> one_of_many(ssh_session& session, tracing::action& parent, int n, int& good,
                                  std::vector<std::string>& failures) {
  // Lines from all channels interleave on the connection; each channel must get exactly its own.
  const auto command = fmt::format("i=0; while [ $i -lt 300 ]; do echo \"channel {0} line $i\"; "
                                   "[ $((i % 50)) -eq 0 ] && sleep 0.01; i=$((i+1)); done; echo done >&2; exit {1}",
                                   n, n % 7);
  diagnostics diag;
  auto r = co_await run_command(parent, session, command, diag);
  std::string expected;
  for (int i = 0; i < 300; ++i) expected += fmt::format("channel {} line {}\n", n, i);
  if (!r)
    failures.push_back(fmt::format("{}: {}", n, diag.message));
  else if (r->out != expected || r->err != "done\n" || r->exit.status != n % 7)
    failures.push_back(fmt::format("{}: wrong output ({} bytes, status {})", n, r->out.size(), r->exit.describe()));
  else
    ++good;
}

TEST_F(ssh_exec, sixty_four_channels_at_once_on_one_session) {
  int good = 0;
  std::vector<std::string> failures;
  diagnostics diag;
  auto ok = run([](ssh_exec& t, int& g, std::vector<std::string>& f, diagnostics& d) -> asio::awaitable<bool> {
    auto session = co_await t.connect(t.server, d);
    if (!session) co_return false;
    std::vector<asio::awaitable<void>> tasks;
    for (int n = 0; n < 64; ++n) tasks.push_back(one_of_many(**session, t.trace.root(), n, g, f));
    co_await run_all(std::move(tasks));
    co_return true;
  }(*this, good, failures, diag));
  ASSERT_TRUE(ok) << diag.message;
  EXPECT_EQ(good, 64);
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// OpenSSH's MaxSessions caps the channels of a connection; commands beyond it wait for a free one.
TEST_F(ssh_capped, commands_wait_for_a_channel_when_the_node_caps_them) {
  test::sshd_server capped(4);
  authorize(capped);
  int good = 0;
  std::vector<std::string> failures;
  diagnostics diag;
  auto ok = run([](ssh_harness& t, const test::sshd_server& s, int& g, std::vector<std::string>& f,
                   diagnostics& d) -> asio::awaitable<bool> {
    auto session = co_await t.connect(s, d);
    if (!session) co_return false;
    std::vector<asio::awaitable<void>> tasks;
    for (int n = 0; n < 12; ++n) tasks.push_back(one_of_many(**session, t.trace.root(), n, g, f));
    co_await run_all(std::move(tasks));
    co_return true;
  }(*this, capped, good, failures, diag));
  ASSERT_TRUE(ok) << diag.message;
  EXPECT_EQ(good, 12);
  for (const auto& f : failures) ADD_FAILURE() << f;
}

asio::awaitable<void> quick(ssh_session& session, tracing::action& parent, std::string command, int& good) {
  diagnostics diag;
  auto r = co_await run_command(parent, session, std::move(command), diag);
  if (r && r->exit.success()) ++good;
}

// Cancels a command after 800 ms, then notes whether its sleep is still there and how long it all took.
asio::awaitable<void> cancel_one(ssh_session& session, tracing::action& parent, const test::sshd_server& server,
                                 error_code& ec, bool& survived, std::chrono::milliseconds& took) {
  const auto start = clock::now();
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex, 800ms);
  diagnostics diag;
  auto command = run_command(parent, session, "sleep 987.125", diag);
  auto deadline = timer.async_wait(asio::use_awaitable);
  auto raced = co_await (std::move(command) || std::move(deadline));
  ec = raced.index() == 0 ? std::get<0>(raced).error() : asio::error::operation_aborted;
  survived = false;
  for (const pid_t pid : server.processes())
    if (test::read_file("/proc/" + std::to_string(pid) + "/cmdline").find("987.125") != std::string::npos)
      survived = true;
  took = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
}

struct full_node_run {
  int good = 0;
  error_code cancelled;
  bool survived = true;
  std::chrono::milliseconds took{0};
};

// Once the session knows the node's cap (4 here), ordinary commands leave one channel free: with three
// commands running and a fourth waiting, cancelling one still gets the channel its kill needs at once.
TEST_F(ssh_capped, a_cancel_finds_a_channel_on_a_full_node) {
  test::sshd_server capped(4);
  authorize(capped);
  full_node_run out;
  diagnostics diag;
  auto ok = run([](ssh_harness& t, const test::sshd_server& s, full_node_run& o,
                   diagnostics& d) -> asio::awaitable<bool> {
    auto session = co_await t.connect(s, d);
    if (!session) co_return false;
    std::vector<asio::awaitable<void>> learn;
    for (int n = 0; n < 5; ++n) learn.push_back(quick(**session, t.trace.root(), "sleep 0.3", o.good));
    co_await run_all(std::move(learn));
    std::vector<asio::awaitable<void>> full;
    full.push_back(cancel_one(**session, t.trace.root(), s, o.cancelled, o.survived, o.took));
    for (int n = 0; n < 3; ++n) full.push_back(quick(**session, t.trace.root(), "sleep 1.5", o.good));
    co_await run_all(std::move(full));
    co_return true;
  }(*this, capped, out, diag));
  ASSERT_TRUE(ok) << diag.message;
  EXPECT_EQ(out.good, 8);
  EXPECT_EQ(out.cancelled, asio::error::operation_aborted);
  EXPECT_FALSE(out.survived) << "the cancelled command's sleep still ran";
  // Without the spare channel the kill would wait for a sleep 1.5 to end.
  EXPECT_LT(out.took, 1300ms);
}

// A sink that takes its time over every chunk, as a slow consumer would.
class slow_sink final : public output_sink {
 public:
  asio::awaitable<error_code> write(output_stream, std::span<const char> bytes) override {
    size += bytes.size();
    asio::steady_timer timer(co_await asio::this_coro::executor, 5ms);
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return ec;
  }
  std::uint64_t size = 0;
};

// Releases stdin only once another channel's output said so.
class gated_source final : public input_source {
 public:
  explicit gated_source(asio::any_io_executor ex) : gate_(ex) {}
  asio::awaitable<result<std::size_t>> read(std::span<char> into) override {
    if (sent_) co_return std::size_t{0};
    const auto opened = co_await gate_.wait();  // (named: GCC 12 and a discarded co_await result)
    (void)opened;
    sent_ = true;
    const std::string_view line = "open sesame\n";
    std::memcpy(into.data(), line.data(), line.size());
    co_return line.size();
  }
  void open() { gate_.set(); }

 private:
  async_event gate_;
  bool sent_ = false;
};

class opening_sink final : public output_sink {
 public:
  explicit opening_sink(gated_source& gate) : gate_(gate) {}
  asio::awaitable<error_code> write(output_stream, std::span<const char> bytes) override {
    seen.append(bytes.data(), bytes.size());
    if (seen.find("ready\n") != std::string::npos) gate_.open();
    co_return error_code{};
  }
  std::string seen;

 private:
  gated_source& gate_;
};

struct cross_timings {
  std::chrono::milliseconds reader{0}, waiter{0}, streamer{0};
  std::string reader_out;
  std::uint64_t streamed = 0;
  std::vector<std::string> failures;
};

asio::awaitable<void> timed(asio::awaitable<result<exit_info>> work, std::chrono::milliseconds& took,
                            std::vector<std::string>& failures, std::string name) {
  const auto start = clock::now();
  auto r = co_await std::move(work);
  took = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
  if (!r || r->status != 0) failures.push_back(name + (r ? ": " + r->describe() : ": " + r.error().message()));
}

// Channel A waits for stdin that the test sends only once channel B printed "ready"; B then sleeps. A
// third channel C streams 40 MiB into a slow sink the whole time, so libssh is constantly reading packets
// (A's and B's among them) on C's behalf. A and B must still finish within moments, long before C.
TEST_F(ssh_exec, a_parked_channel_gets_its_data_while_others_are_served) {
  cross_timings t;
  diagnostics diag;
  auto ok = run([](ssh_exec& self, cross_timings& out, diagnostics& d) -> asio::awaitable<bool> {
    auto session = co_await self.connect(self.server, d);
    if (!session) co_return false;
    auto ex = co_await asio::this_coro::executor;
    gated_source gate(ex);
    opening_sink opener(gate);
    collect_sink reader_out;
    slow_sink slow;
    exec_request a{"read line; echo \"A got $line\"", &gate, &reader_out};
    exec_request b{"sleep 0.3; echo ready; sleep 0.2", nullptr, &opener};
    exec_request c{"head -c 41943040 /dev/zero", nullptr, &slow};
    std::vector<asio::awaitable<void>> tasks;
    tasks.push_back(timed(exec(self.trace.root(), **session, c, d), out.streamer, out.failures, "C"));
    tasks.push_back(timed(exec(self.trace.root(), **session, a, d), out.reader, out.failures, "A"));
    tasks.push_back(timed(exec(self.trace.root(), **session, b, d), out.waiter, out.failures, "B"));
    co_await run_all(std::move(tasks));
    out.reader_out = reader_out.out;
    out.streamed = slow.size;
    co_return true;
  }(*this, t, diag));
  ASSERT_TRUE(ok) << diag.message;
  for (const auto& f : t.failures) ADD_FAILURE() << f;
  EXPECT_EQ(t.reader_out, "A got open sesame\n");
  EXPECT_EQ(t.streamed, 40u << 20);
  std::cout << "A " << t.reader.count() << " ms, B " << t.waiter.count() << " ms, C " << t.streamer.count()
            << " ms\n";
  // C cannot take less than 640 chunks of at most 64 KiB, 5 ms each.
  EXPECT_GE(t.streamer.count(), 3000);
  EXPECT_LT(t.reader.count(), 2000);
  EXPECT_LT(t.waiter.count(), 2000);
}

}  // namespace
}  // namespace ferry::net
