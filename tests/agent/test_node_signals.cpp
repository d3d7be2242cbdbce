// The node program and TERM: the real ferry-node binary, run here with its plan on a pipe, gets TERM
// while it is in a given phase (waiting for its plan, before and after the line that names its task;
// loading its TLS context; fetching from a server that never answers, for materialise and for stage;
// inflating a shard;
// serving; a lazy start whose command waits on an import; setting the idle watchdog), and must then end
// every action it began and exit by itself (130), never by the KILL that ferry sends after
// ssh.kill_grace. Python's eliot parser is the judge of its trace. The phase is read from its own trace
// (and /proc, where the trace cannot tell), never guessed from a sleep. A program that ignored TERM is
// killed once its output has been silent for a bound, and the test fails.
#include "agent/node/idle_watchdog.hpp"
#include "agent/node/plan.hpp"
#include "agent/node/serve_request.hpp"
#include "agent/node/stage_plan.hpp"
#include "support/eliot.hpp"
#include "net/digest.hpp"
#include "support/loopback_listener.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include "zip_fixture.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <spawn.h>
#include <string>
#include <thread>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace ferry::agent::node {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// ferry-node with its stdin and stdout on pipes: the test writes the plan, reads the trace as it comes.
class node_program_run {
 public:
  // `extra_env`: NAME=VALUE entries added to this process's environment.
  explicit node_program_run(const std::string& subcommand, const std::vector<std::string>& extra_env = {}) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    std::vector<std::string> argv{FERRY_NODE_PROGRAM, subcommand};
    auto pointers = test::c_pointers(argv);
    std::vector<std::string> env(extra_env);
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    auto env_pointers = test::c_pointers(env);
    if (::posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, pointers.data(), env_pointers.data()) != 0)
      throw std::runtime_error("cannot start the node program");
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    in_ = in[1];
    out_ = out[0];
  }
  ~node_program_run() {
    if (in_ >= 0) ::close(in_);
    if (out_ >= 0) ::close(out_);
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  void write(const std::string& text) {
    if (::write(in_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) throw std::runtime_error("write");
  }

  // Reads its trace until a message of `type` (action or message type) with `status` (for an action)
  // shows; false when its output ended first.
  bool wait_for(std::string_view type, std::string_view status = "started") {
    for (;;) {
      for (auto nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n')) {
        const auto line = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        trace_ += line + "\n";
        json::error_code ec;
        const auto v = json::parse(line, ec);
        if (ec || !v.is_object()) continue;
        const auto& o = v.get_object();
        const auto* at = o.if_contains("action_type");
        const auto* st = o.if_contains("action_status");
        const auto* mt = o.if_contains("message_type");
        if ((at && st && at->as_string() == type && st->as_string() == status) || (mt && mt->as_string() == type)) {
          last_ = o;
          return true;
        }
      }
      if (!read_more()) return false;
    }
  }

  // Sends `sig`, then reads its output to the end and reaps it. A program whose output stays silent for
  // the bound (one that ignored the signal) is killed here: the status then says KILL (137).
  int signal_and_wait(int sig) {
    ::kill(pid_, sig);
    while (read_more()) {
    }
    trace_ += pending_;
    if (silent_) ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // Waits until the program's main thread, exec'd, sleeps in a system call (before its plan's first line,
  // it can only be waiting for that line). False when it ended, or did not sleep within the bound.
  bool wait_until_asleep() {
    const auto exe = fs::canonical(FERRY_NODE_PROGRAM);
    for (int i = 0; i < bound_polls; ++i) {
      std::error_code ec;
      std::ifstream stat_file(fmt::format("/proc/{}/stat", pid_));
      std::string stat((std::istreambuf_iterator<char>(stat_file)), {});
      const auto close = stat.rfind(')');
      if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z') return false;
      if (fs::read_symlink(fmt::format("/proc/{}/exe", pid_), ec) == exe && stat[close + 2] == 'S') return true;
      ::poll(nullptr, 0, poll_ms);
    }
    return false;
  }

  const std::string& trace() const { return trace_; }
  // The message wait_for found last.
  const json::object& last() const { return last_; }
  pid_t pid() const { return pid_; }

 private:
  static constexpr int poll_ms = 10;
  static constexpr int bound_polls = 3000;  // 30 s: no phase here takes near that long to show
  // More output, false at its end or after the bound without any.
  bool read_more() {
    pollfd p{out_, POLLIN, 0};
    if (::poll(&p, 1, poll_ms * bound_polls) <= 0) {
      silent_ = true;
      return false;
    }
    char buffer[1 << 14];
    const auto n = ::read(out_, buffer, sizeof buffer);
    if (n <= 0) return false;
    pending_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  bool reaped_ = false;
  bool silent_ = false;
  std::string pending_;
  std::string trace_;
  json::object last_;
};

class node_signals : public ::testing::Test {
 protected:
  plan_header header() const {
    plan_header h;
    h.cache_dir = (dir.path() / "cache").string();
    h.limits.connect_timeout_ms = 600'000;
    h.limits.read_timeout_ms = 600'000;  // a stalled server is never given up on by itself
    h.limits.attempts = 1;
    h.limits.shutdown_grace_ms = 600'000;  // the work must end by itself, not by the grace
    return h;
  }

  // A layer of one shard behind `url`: a server that never answers.
  layer_source stalled_layer(const std::string& url) const {
    layer_source l;
    l.id = std::string(64, 'b');
    l.name = "stalled";
    l.shards.push_back({url, std::string(64, 'c'), 1000, 1, 10, std::string(64, 'd')});
    return l;
  }

  // Every task eliot rebuilds from `trace` is complete, and the root ended as `how` (failed: cancelled).
  void expect_every_action_ended(const std::string& trace, std::string_view root, std::string_view how = "failed") {
    const auto file = dir.path() / "node.jsonl";
    std::ofstream(file, std::ios::binary) << trace;
    const auto tasks = test::eliot_parse({file});
    ASSERT_FALSE(tasks.empty()) << trace;
    bool root_seen = false;
    for (const auto& t : tasks) {
      EXPECT_TRUE(t.at("complete").as_bool()) << trace;
      for (const auto& line : test::flatten(t.at("root"))) {
        EXPECT_EQ(line.find(":started"), std::string::npos) << "never ended: " << line << "\n" << trace;
        if (line.find(fmt::format("{}:{}", root, how)) != std::string::npos) root_seen = true;
      }
    }
    EXPECT_TRUE(root_seen) << trace;
    if (how == "failed") {
      EXPECT_NE(trace.find("\"reason\":\"cancelled\""), std::string::npos) << trace;
    }
  }

  test::temp_dir dir;
};

TEST_F(node_signals, term_before_the_plan_names_its_task_exits_with_nothing_begun) {
  node_program_run run("materialise");
  // Nothing written: it waits for the plan's first line, and has begun no action.
  ASSERT_TRUE(run.wait_until_asleep());
  EXPECT_EQ(run.signal_and_wait(SIGTERM), 130);
  EXPECT_EQ(run.trace(), "");
}

// The system's trusted certificates are read from a FIFO that nobody writes: loading them blocks in open()
// until a signal comes, with the root action begun.
TEST_F(node_signals, term_while_the_tls_context_loads_ends_every_action) {
  const auto fifo = dir.path() / "certificates.pem";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  node_program_run run("materialise", {"SSL_CERT_FILE=" + fifo.string()});
  run.write(header_line(header()) + "\n");
  ASSERT_TRUE(run.wait_for(action_types::node::materialise));
  ASSERT_TRUE(run.wait_until_asleep());
  EXPECT_EQ(run.signal_and_wait(SIGTERM), 130);
  expect_every_action_ended(run.trace(), action_types::node::materialise);
}

TEST_F(node_signals, term_while_the_plan_streams_in_ends_every_action_and_exits) {
  node_program_run run("materialise");
  run.write(header_line(header()) + "\n");
  ASSERT_TRUE(run.wait_for(action_types::node::cache));
  // The plan's further lines have not come: the program waits on its input.
  EXPECT_EQ(run.signal_and_wait(SIGTERM), 130);
  expect_every_action_ended(run.trace(), action_types::node::materialise);
}

TEST_F(node_signals, term_while_a_shard_downloads_from_a_server_that_never_answers_ends_every_action) {
  auto silent = test::listen_on_loopback("the silent server");
  node_program_run run("materialise");
  run.write(header_line(header()) + "\n");
  run.write(layer_line(0, stalled_layer(fmt::format("http://127.0.0.1:{}/shard.zip", silent.port))) + "\n");
  run.write(end_line({1, std::nullopt}) + "\n");
  ASSERT_TRUE(run.wait_for(action_types::node::shard));
  EXPECT_EQ(run.signal_and_wait(SIGTERM), 130);
  ::close(silent.fd);
  expect_every_action_ended(run.trace(), action_types::node::materialise);
}

// The command's import hook asks for a module whose only layer downloads from a server that never answers.
TEST_F(node_signals, term_while_a_lazy_start_command_waits_on_an_import_ends_every_action) {
  auto silent = test::listen_on_loopback("the silent server");
  auto h = header();
  h.lazy = true;
  const auto layer = stalled_layer(fmt::format("http://127.0.0.1:{}/shard.zip", silent.port));
  plan_catalogue c;
  c.layers.push_back({0, layer.id, layer.name, 0, {"stalled"}, {}});
  node_program_run run("materialise");
  run.write(header_line(h) + "\n");
  run.write(catalogue_line(c) + "\n");
  ASSERT_TRUE(run.wait_for(action_types::node::may_start));
  const std::string socket_path(run.last().at("socket").as_string());
  run.write(layer_line(0, layer) + "\n");
  ASSERT_TRUE(run.wait_for(action_types::node::shard));

  const int hook = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof addr.sun_path);
  std::copy(socket_path.begin(), socket_path.end(), addr.sun_path);
  ASSERT_EQ(::connect(hook, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << socket_path;
  const std::string want = "want module stalled\n";
  ASSERT_EQ(::write(hook, want.data(), want.size()), static_cast<ssize_t>(want.size()));
  ASSERT_TRUE(run.wait_for(action_types::node::import_wait));

  EXPECT_EQ(run.signal_and_wait(SIGTERM), 130);
  ::close(hook);
  ::close(silent.fd);
  expect_every_action_ended(run.trace(), action_types::node::materialise);
}

// The largest file named `name` below `dir` now (0: none), while the program makes and removes directories.
std::uintmax_t largest(const fs::path& dir, const std::string& name) {
  std::uintmax_t most = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename() != name) continue;
    std::error_code size_ec;
    const auto size = fs::file_size(it->path(), size_ec);
    if (!size_ec) most = std::max(most, size);
  }
  return most;
}

// A shard of 900 MiB of zeros, which deflate makes less than a megabyte: it comes whole in one GET, and
// inflating it is the pool's work, where no I/O waits for TERM to cut. How far the entry grew on disk
// tells whether inflating stopped soon after TERM (a slice) or went on to the end.
TEST_F(node_signals, term_while_a_shard_inflates_stops_within_a_slice_and_ends_every_action) {
  constexpr std::size_t size = 900u << 20;
  const auto zip_file = dir.path() / "big.zip";
  const auto made = test::run({test::system_python, "-c",
                               fmt::format("import zipfile\n"
                                           "z = zipfile.ZipFile({:?}, 'w', zipfile.ZIP_DEFLATED)\n"
                                           "i = zipfile.ZipInfo('big.bin', (2020, 1, 1, 0, 0, 0))\n"
                                           "i.external_attr = 0o100644 << 16\n"
                                           "i.compress_type = zipfile.ZIP_DEFLATED\n"
                                           "z.writestr(i, bytes({}))\n"
                                           "z.close()\n",
                                           zip_file.string(), size)});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const auto zip = test::read_file(zip_file);
  ASSERT_LT(zip.size(), 1u << 20);  // comes whole (shard_fetch.cpp)
  test::moto_options mo;
  mo.auth = false;  // presigned GETs
  test::moto_server moto(mo);
  moto.make_bucket("big");
  ASSERT_EQ(moto.aws({"s3", "cp", zip_file.string(), "s3://big/big.zip"}).exit_code, 0);
  const auto url = moto.aws({"s3", "presign", "s3://big/big.zip"});
  ASSERT_EQ(url.exit_code, 0) << url.err;
  layer_source layer;
  layer.id = std::string(64, 'f');
  layer.name = "big";
  layer.shards.push_back({url.out.substr(0, url.out.find('\n')), net::hex_sha256(zip), zip.size(), 1, size,
                          test_zip::shard_id({{"big.bin", std::string(size, '\0')}}), "big.zip"});

  node_program_run run("materialise");
  run.write(header_line(header()) + "\n");
  run.write(layer_line(0, layer) + "\n");
  run.write(end_line({1, std::nullopt}) + "\n");
  std::atomic<bool> over{false};
  std::atomic<std::uintmax_t> most{0};
  std::thread watch([&] {
    while (!over) {
      most = std::max<std::uintmax_t>(most, largest(dir.path() / "cache", "big.bin"));
      ::poll(nullptr, 0, 2);
    }
  });
  // TERM once inflating has begun: the entry is on disk.
  for (int i = 0; i < 15000 && most == 0; ++i) ::poll(nullptr, 0, 2);
  const bool began = most > 0;
  const auto code = run.signal_and_wait(SIGTERM);
  over = true;
  watch.join();
  ASSERT_TRUE(began) << "the entry never appeared:\n" << run.trace();
  EXPECT_EQ(code, 130);
  EXPECT_LT(most.load(), size / 2) << "inflating went on after TERM";
  EXPECT_EQ(largest(dir.path() / "cache", "big.bin"), 0u);  // nothing half made is kept
  expect_every_action_ended(run.trace(), action_types::node::materialise);
}

class node_signals_stage : public node_signals {
 protected:
  stage_request request(std::size_t objects, const std::string& url) const {
    stage_request r;
    r.task_id = "";
    r.source = "s3://bucket/prefix";
    r.node_dir = (dir.path() / "staged").string();
    r.limits = header().limits;
    for (std::size_t i = 0; i < objects; ++i)
      r.objects.push_back({fmt::format("data/{}.bin", i), url, 1000, std::string(32, 'e')});
    return r;
  }
};

TEST_F(node_signals_stage, term_while_the_staging_plan_is_read_ends_every_action) {
  const auto lines = stage_lines(request(2, "http://127.0.0.1:1/never"));
  node_program_run run("stage");
  // The header and the first object line: the second never comes.
  const auto second = lines.find('\n', lines.find('\n') + 1);
  run.write(lines.substr(0, second + 1));
  ASSERT_TRUE(run.wait_for(action_types::node::stage));
  EXPECT_EQ(run.signal_and_wait(SIGTERM), 130);
  expect_every_action_ended(run.trace(), action_types::node::stage);
}

TEST_F(node_signals_stage, term_while_an_object_downloads_from_a_server_that_never_answers_ends_every_action) {
  auto silent = test::listen_on_loopback("the silent server");
  node_program_run run("stage");
  run.write(stage_lines(request(1, fmt::format("http://127.0.0.1:{}/object", silent.port))));
  ASSERT_TRUE(run.wait_for(action_types::node::stage_attempt));
  EXPECT_EQ(run.signal_and_wait(SIGTERM), 130);
  ::close(silent.fd);
  expect_every_action_ended(run.trace(), action_types::node::stage);
}

TEST_F(node_signals, term_while_serving_ends_every_action) {
  serve_request r;
  r.limits = header().limits;
  r.cache_dir = (dir.path() / "cache").string();
  r.serve_id = std::string(32, 'a');
  r.token = std::string(64, 'd');
  r.bind = "127.0.0.1";
  node_program_run run("serve");
  run.write(serve_request_line(r) + "\n");
  ASSERT_TRUE(run.wait_for(action_types::node::listening));
  EXPECT_EQ(run.signal_and_wait(SIGTERM), 130);
  // Serving ends when it is told to: what it served is its outcome.
  expect_every_action_ended(run.trace(), action_types::node::serve, "succeeded");
}

// Setting the watchdog waits for the old one to go; this one (a shell whose command line reads as the
// watchdog's) notes the TERM it gets and stays.
TEST_F(node_signals, term_while_the_watchdog_is_set_ends_its_action_with_its_outcome) {
  const auto state = dir.path() / "state";
  fs::create_directories(state);
  const auto termed = state / "termed";
  std::vector<std::string> argv{"/bin/sh", "-c",
                                fmt::format("trap 'touch {}' TERM; while :; do sleep 0.05; done", termed.string()),
                                "watchdog-loop", state.string()};
  auto pointers = test::c_pointers(argv);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  pid_t old = -1;
  ASSERT_EQ(::posix_spawn(&old, argv[0].c_str(), nullptr, &attr, pointers.data(), environ), 0);
  posix_spawnattr_destroy(&attr);
  std::ofstream(state / "watchdog.pid") << old;

  watchdog_request w;
  w.state_dir = state.string();  // no idle timeout: the running one is stopped
  node_program_run run("watchdog");
  run.write(watchdog_line(w));
  ASSERT_TRUE(run.wait_for(action_types::node::watchdog));
  for (int i = 0; i < 3000 && !fs::exists(termed); ++i) ::poll(nullptr, 0, 10);
  ASSERT_TRUE(fs::exists(termed));
  // It waits for the old watchdog to go.
  EXPECT_EQ(run.signal_and_wait(SIGTERM), 130);
  ::kill(-old, SIGKILL);
  ::waitpid(old, nullptr, 0);
  expect_every_action_ended(run.trace(), action_types::node::watchdog, "succeeded");
}

}  // namespace
}  // namespace ferry::agent::node
