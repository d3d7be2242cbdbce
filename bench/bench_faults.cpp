// The fault matrix: ferry against storage that breaks, counted rather than timed.
//
//   cut:    uploads (`ferry storage cp`) through the test proxy, each connection cut at a random byte
//           offset; half the time only the first connection (a retry can finish), half the time every
//           one (the upload must fail). Every object that exists afterwards is read back with the aws CLI
//           and compared with its source; no multipart upload may be left in the bucket.
//   freeze: a pack of one layer in 2 shards, each a multipart upload, with moto_server stopped (SIGSTOP)
//           once both uploads exist. ferry must exit non-zero on its own; the time from the freeze to
//           the exit is compared with the configured deadlines.
//   ctrl-c: the same pack (a fresh prefix each time) interrupted with SIGINT at a random moment in its
//           first 2.5 s: the time to exit, the multipart uploads left in the bucket, the trace complete.
//
//   ctrl-c run: a cold `ferry run --nodes 1` (fresh prefix, no hash cache, a node the run brings up with an
//           empty layer cache) interrupted with SIGINT at a random moment of its uninterrupted length: the
//           exit code and time, multipart uploads left, ferry's child processes still alive 3 s later, the
//           processes left on the nodes (all but sshd listeners and the idle watchdog), every action ended.
//   sshd:   `ferry run` on a fresh local node whose sshd processes (listener and sessions) are all killed
//           at a random moment in the command's first 0.5 s: ferry's exit (code, whether it names the node,
//           time from the kill) and the remote command's end, which the node's watchdog brings about.
//   secrets: `ferry run --env NAME=VALUE` with a secret key and a session token (which presigned URLs carry)
//           while every process's argv is read every 2 ms; then every file ferry and the local nodes wrote
//           is searched for the key, the token, a signature (X-Amz-Signature=<64 hex>) and the --env value.
// FERRY_BENCH_CUTS (100), FERRY_BENCH_FREEZES (20), FERRY_BENCH_INTERRUPTS (50), FERRY_BENCH_RUN_INTERRUPTS
// (50), FERRY_BENCH_SSHD_KILLS (20) and FERRY_BENCH_SECRET_RUNS (5) set the rounds; 0 skips a row.
#include "bench_support.hpp"
#include "support/eliot.hpp"
#include "support/fault_proxy.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

namespace {

namespace fs = std::filesystem;
using ferry::test::fault_proxy;
using ferry::test::moto_server;
using ferry::test::temp_dir;

int rounds(const char* variable, int fallback) {
  const char* v = std::getenv(variable);
  return v ? std::max(0, std::atoi(v)) : fallback;
}

void write_random(const fs::path& file, std::size_t size, std::mt19937_64& rng) {
  std::string bytes(size, '\0');
  for (auto& b : bytes) b = static_cast<char>(rng());
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool same_file(const fs::path& a, const fs::path& b) {
  return fs::file_size(a) == fs::file_size(b) && ferry::test::read_file(a) == ferry::test::read_file(b);
}

std::size_t multipart_uploads_left(const moto_server& moto, const std::string& bucket) {
  const auto r = moto.aws({"s3api", "list-multipart-uploads", "--bucket", bucket, "--query", "length(Uploads || `[]`)",
                           "--output", "text"});
  if (r.exit_code != 0) throw std::runtime_error("list-multipart-uploads failed: " + r.err);
  return static_cast<std::size_t>(std::stoul(r.out));
}

// Waits for `pid` to end, checking every 10 ms; false when it still runs after 2 minutes (a hang).
bool ends_within_two_minutes(pid_t pid) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (std::chrono::steady_clock::now() < until) {
    if (ferry::test::dead_or_zombie(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void cut_uploads(int count) {
  moto_server moto;
  moto.make_bucket("cuts");
  fault_proxy proxy("127.0.0.1", moto.port());
  temp_dir dir;
  std::mt19937_64 rng(20261124);
  auto options = moto.process_env();
  options.env["AWS_ENDPOINT_URL"] = proxy.endpoint();
  options.env["XDG_STATE_HOME"] = (dir / "state").string();
  options.env["XDG_CACHE_HOME"] = (dir / "cache").string();
  options.env["FERRY_S3_MULTIPART_THRESHOLD"] = "8MiB";
  options.env["FERRY_S3_PART_SIZE"] = "5MiB";
  options.env["FERRY_NET_RETRY_MAX_ATTEMPTS"] = "3";
  int succeeded = 0, failed = 0, corrupt = 0, absent_after_failure = 0;
  for (int i = 0; i < count; ++i) {
    const auto size = std::uniform_int_distribution<std::size_t>(64 << 10, 24 << 20)(rng);
    const auto source = dir / fmt::format("source-{}.bin", i);
    write_random(source, size, rng);
    const bool every = i % 2 == 1;
    proxy.clear_faults();
    proxy.set_faulty_connections(every ? fault_proxy::unlimited : 1);
    // The request's headers come first: a cut anywhere from the first byte to the body's last.
    proxy.cut_upload_after(std::uniform_int_distribution<std::uint64_t>(1, size)(rng));
    const auto key = fmt::format("object-{}.bin", i);
    const auto r = ferry::test::run_ferry({"storage", "cp", source.string(), "s3://cuts/" + key}, options);
    proxy.clear_faults();
    const auto back = dir / "back.bin";
    fs::remove(back);
    const auto got = moto.aws({"s3", "cp", "s3://cuts/" + key, back.string()});
    const bool stored = got.exit_code == 0;
    if (r.exit_code == 0) {
      ++succeeded;
      if (!stored || !same_file(source, back)) ++corrupt;
    } else {
      ++failed;
      if (!stored) ++absent_after_failure;
      else if (!same_file(source, back)) ++corrupt;
    }
    fs::remove(source);
  }
  const auto left = multipart_uploads_left(moto, "cuts");
  fmt::print("cut uploads: {} rounds, {} succeeded, {} failed ({} of them left no object), {} corrupt objects, "
             "{} multipart uploads left, {} connections cut\n",
             count, succeeded, failed, absent_after_failure, corrupt, left, proxy.connections_cut());
}

// `ferry pack` of the workspace `ws` (one layer of 2 shards) into `url`, with its state under `state`.
ferry::test::process_options pack_options(const moto_server& moto, const temp_dir& ws, const temp_dir& state,
                                          const std::string& url) {
  auto options = moto.process_env();
  options.cwd = ws.path();
  options.env["XDG_STATE_HOME"] = (state / "state").string();
  options.env["XDG_CACHE_HOME"] = (state / "cache").string();
  options.env["FERRY_STORAGE_URL"] = url;
  options.env["FERRY_PACKAGING_SHIP_SITE_PACKAGES"] = "false";
  options.env["FERRY_PACKAGING_SHARD_SIZE"] = "20MiB";
  return options;
}

void freeze_packs(int count) {
  temp_dir ws, state;
  std::mt19937_64 rng(7);
  write_random(ws / "a.bin", 24 << 20, rng);
  write_random(ws / "b.bin", 24 << 20, rng);
  constexpr double read_timeout = 3.0;
  double worst = 0;
  int hangs = 0, nonzero = 0;
  for (int i = 0; i < count; ++i) {
    moto_server moto;
    moto.make_bucket("frozen");
    auto options = pack_options(moto, ws, state, fmt::format("s3://frozen/round-{}/", i));
    options.env["FERRY_NET_READ_TIMEOUT"] = "3s";
    options.env["FERRY_NET_WRITE_TIMEOUT"] = "3s";
    options.env["FERRY_NET_RETRY_MAX_ATTEMPTS"] = "1";
    auto child = ferry::test::spawn_ferry({"pack"}, options);
    auto uploads = [&] {
      const auto log = moto.log();
      std::size_t n = 0;
      for (auto at = log.find("?uploads="); at != std::string::npos; at = log.find("?uploads=", at + 1)) ++n;
      return n;
    };
    for (int t = 0; t < 1500 && uploads() < 2 && !ferry::test::dead_or_zombie(child->pid()); ++t)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    moto.freeze();
    const auto frozen_at = std::chrono::steady_clock::now();
    const bool ended = ends_within_two_minutes(child->pid());
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen_at).count();
    moto.thaw();
    if (!ended) {
      ++hangs;
      child->signal(SIGKILL);
    }
    const auto r = child->wait();
    if (r.exit_code != 0) ++nonzero;
    worst = std::max(worst, took);
    fmt::print("  freeze round {}: exit {} {:.2f} s after the freeze\n", i + 1, r.exit_code, took);
  }
  fmt::print("frozen storage: {} rounds, {} hangs (no exit within 120 s), {} exited non-zero, slowest exit {:.2f} s "
             "after the freeze (net.read_timeout {:.0f} s, 1 attempt; then the abort's own deadline)\n",
             count, hangs, nonzero, worst, read_timeout);
}

void interrupt_packs(int count) {
  temp_dir ws, state;
  std::mt19937_64 rng(11);
  write_random(ws / "a.bin", 24 << 20, rng);
  write_random(ws / "b.bin", 24 << 20, rng);
  moto_server moto;
  moto.make_bucket("interrupted");
  double worst = 0;
  int completed = 0, interrupted = 0, incomplete_traces = 0;
  for (int i = 0; i < count; ++i) {
    auto options = pack_options(moto, ws, state, fmt::format("s3://interrupted/round-{}/", i));
    const auto trace = state / fmt::format("round-{}.jsonl", i);
    auto child = ferry::test::spawn_ferry({"pack", "--trace", trace.string()}, options);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 2500)(rng)));
    const auto sent = std::chrono::steady_clock::now();
    child->signal(SIGINT);
    const auto r = child->wait();
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    worst = std::max(worst, took);
    (r.exit_code == 130 ? interrupted : completed) += 1;
    const auto tasks = ferry::test::eliot_parse({trace});
    if (tasks.size() != 1 || !tasks[0].at("complete").as_bool()) ++incomplete_traces;
  }
  const auto left = multipart_uploads_left(moto, "interrupted");
  fmt::print("ctrl-c: {} rounds, {} interrupted (exit 130), {} finished first, slowest exit {:.2f} s after SIGINT, "
             "{} multipart uploads left, {} traces that python3-eliot could not rebuild whole\n",
             count, interrupted, completed, worst, left, incomplete_traces);
}

// The pid in `file` once the remote command wrote it whole; 0 until then.
int pid_in(const fs::path& file) {
  const auto text = ferry::test::read_file(file);
  return !text.empty() && text.back() == '\n' ? std::stoi(text) : 0;
}

bool gone(int pid) { return pid > 0 && ferry::test::dead_or_zombie(pid); }

// Every sshd process of local node `id` (its listener and its sessions), killed at once. How many.
int kill_sshd_of(const std::string& id) {
  const auto in_node = ferry::test::run({"ip", "netns", "pids", "ferry-" + id});
  std::istringstream pids(in_node.out);
  int killed = 0;
  for (int p = 0; pids >> p;) {
    if (ferry::test::read_file(fmt::format("/proc/{}/comm", p)) != "sshd\n") continue;
    ::kill(p, SIGKILL);
    ++killed;
  }
  return killed;
}

// The only node in the registry under `state`.
std::string only_node(const temp_dir& state) {
  const auto doc = boost::json::parse(ferry::test::read_file(state / "state" / "ferry" / "nodes.json"));
  const auto& nodes = doc.at("nodes").as_array();
  if (nodes.size() != 1) throw std::runtime_error("expected one node in the registry");
  return std::string(nodes[0].at("id").as_string());
}

// A workspace with a venv of its own, and ferry's options for runs from it on local nodes.
struct run_setup {
  temp_dir ws, state;
  ferry::test::process_options options;

  run_setup() {
    ws.write("main.py", "print('hello')\n");
    ws.write("ferry.toml", "[packaging]\npython = \".venv/bin/python\"\n");
    if (ferry::test::run({"/usr/bin/python3", "-m", "venv", "--without-pip", (ws / ".venv").string()}).exit_code != 0)
      throw std::runtime_error("python3 -m venv failed");
    options.cwd = ws.path();
    options.env["HOME"] = state.path().string();
    options.env["XDG_STATE_HOME"] = (state / "state").string();
    options.env["XDG_CACHE_HOME"] = (state / "cache").string();
    options.env["XDG_CONFIG_HOME"] = (state / "config").string();
    options.env["FERRY_NODES_IDLE_TIMEOUT"] = "600s";
    options.env["FERRY_NODES_WATCHDOG_INTERVAL"] = "500ms";
    options.unset_env.push_back("SSH_AUTH_SOCK");
    // The first node brings up the bridge that storage must listen on for the nodes to reach it.
    if (ferry::test::run_ferry({"nodes", "up", "1"}, options).exit_code != 0)
      throw std::runtime_error("nodes up failed");
  }
  // Storage as the nodes reach it.
  void use(const moto_server& moto) {
    const auto env = moto.process_env();
    for (const auto& [k, v] : env.env) options.env[k] = v;
    options.unset_env.insert(options.unset_env.end(), env.unset_env.begin(), env.unset_env.end());
  }
};

void kill_sshd_during_runs(int count) {
  run_setup setup;
  auto& options = setup.options;
  const auto& state = setup.state;
  moto_server moto({.host = "10.200.0.1"});
  moto.make_bucket("runs");
  setup.use(moto);
  std::mt19937_64 rng(13);
  double worst_exit = 0, worst_gone = 0;
  int clear = 0, outlived = 0, hangs = 0, started = 0;
  for (int i = 0; i < count; ++i) {
    if (i > 0 && ferry::test::run_ferry({"nodes", "up", "1"}, options).exit_code != 0)
      throw std::runtime_error("nodes up failed");
    const auto id = only_node(state);
    options.env["FERRY_STORAGE_URL"] = fmt::format("s3://runs/round-{}", i);
    const auto pid_file = state / fmt::format("remote-{}.pid", i);
    auto child = ferry::test::spawn_ferry(
        {"run", "--", "sh", "-c", fmt::format("sleep 600 & echo $! > {}; wait", pid_file.string())}, options);
    // While the command runs (before, a warm node that does not answer is replaced, and the run goes on).
    for (int t = 0; t < 6000 && pid_in(pid_file) == 0 && !ferry::test::dead_or_zombie(child->pid()); ++t)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 500)(rng)));
    kill_sshd_of(id);
    const auto killed_at = std::chrono::steady_clock::now();
    const bool ended = ends_within_two_minutes(child->pid());
    const double exit_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
    if (!ended) {
      ++hangs;
      child->signal(SIGKILL);
    }
    const auto r = child->wait();
    const bool named = r.exit_code != 0 && r.err.find(id) != std::string::npos;
    clear += named ? 1 : 0;
    worst_exit = std::max(worst_exit, exit_after);
    // The remote command, if it started: gone once the node's watchdog has seen it orphaned.
    const int pid = pid_in(pid_file);
    double gone_after = 0;
    if (pid > 0) {
      ++started;
      while (!gone(pid) && std::chrono::steady_clock::now() - killed_at < std::chrono::seconds(30))
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      gone_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
      if (!gone(pid)) {
        ++outlived;
        ::kill(pid, SIGKILL);
      }
      worst_gone = std::max(worst_gone, gone_after);
    }
    fmt::print("  sshd round {}: exit {} {:.2f} s after the kill{}; remote command {}\n", i + 1, r.exit_code,
               exit_after, named ? ", the node named" : "",
               pid > 0 ? fmt::format("gone {:.2f} s after", gone_after) : std::string("never started"));
    ferry::test::run_ferry({"nodes", "down", "--all"}, options);
  }
  fmt::print("sshd killed: {} rounds, {} hangs (no exit within 120 s), {} non-zero exits naming the node, slowest "
             "exit {:.2f} s after the kill; {} remote commands had started, {} outlived 30 s, the last gone {:.2f} s "
             "after the kill (watchdog tick 0.5 s, TERM then KILL a tick later)\n",
             count, hangs, clear, worst_exit, started, outlived, worst_gone);
}

// A process as /proc shows it: (pid, start time in clock ticks), so a reused pid is not mistaken for it.
using proc_id = std::pair<int, std::string>;

std::string start_time(int pid) {
  const auto stat = ferry::test::read_file(fmt::format("/proc/{}/stat", pid));
  const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return {};
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
  }
  return field;  // field 22: starttime
}

bool alive(const proc_id& p) {
  return !ferry::test::dead_or_zombie(p.first) && start_time(p.first) == p.second;
}

// Whether `pid` shares this process's network namespace (a local node's sshd does not: it is the node).
bool on_the_workstation(int pid) {
  std::error_code a, b;
  return fs::read_symlink(fmt::format("/proc/{}/ns/net", pid), a) == fs::read_symlink("/proc/self/ns/net", b) && !a;
}

// The local nodes' network namespaces (ferry-ID) there are now.
std::set<std::string> node_namespaces() {
  std::set<std::string> out;
  std::istringstream names(ferry::test::run({"ip", "netns", "list"}).out);
  for (std::string line; std::getline(names, line);) {
    const auto ns = line.substr(0, line.find(' '));
    if (ns.rfind("ferry-", 0) == 0) out.insert(ns);
  }
  return out;
}

// The local nodes made since `before` that the registry under `state` does not hold.
int unrecorded_nodes(const fs::path& state, const std::set<std::string>& before) {
  std::string registry;
  if (fs::exists(state / "state" / "ferry" / "nodes.json"))
    registry = ferry::test::read_file(state / "state" / "ferry" / "nodes.json");
  int missing = 0;
  for (const auto& ns : node_namespaces())
    if (!before.contains(ns) && registry.find("\"" + ns.substr(6) + "\"") == std::string::npos) ++missing;
  return missing;
}

// Every process descended from `root` now.
std::set<proc_id> descendants(int root) {
  std::map<int, std::vector<int>> children;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const auto name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const auto status = ferry::test::read_file(e.path() / "status");
    const auto at = status.find("\nPPid:");
    if (at != std::string::npos) children[std::atoi(status.c_str() + at + 7)].push_back(std::stoi(name));
  }
  std::set<proc_id> out;
  std::vector<int> todo{root};
  while (!todo.empty()) {
    const int p = todo.back();
    todo.pop_back();
    for (int c : children[p]) {
      out.insert({c, start_time(c)});
      todo.push_back(c);
    }
  }
  return out;
}

// The processes inside every local node's network namespace but their sshd listeners and the idle
// watchdogs ferry leaves on purpose: what a run left behind there.
std::vector<std::string> left_on_nodes() {
  std::vector<std::string> out;
  for (const auto& ns : node_namespaces()) {
    std::istringstream pids(ferry::test::run({"ip", "netns", "pids", ns}).out);
    for (int p = 0; pids >> p;) {
      auto argv = ferry::test::read_file(fmt::format("/proc/{}/cmdline", p));
      std::replace(argv.begin(), argv.end(), '\0', ' ');
      if (argv.empty() || argv.find("watchdog") != std::string::npos) continue;
      if (argv.rfind("sshd: ", 0) == 0 || argv.find("/sshd ") != std::string::npos) {
        if (argv.find("[listener]") != std::string::npos || argv.find(" -D") != std::string::npos) continue;
      }
      out.push_back(fmt::format("{} {}: {}", ns, p, argv.substr(0, 80)));
    }
  }
  return out;
}

// Whether python3-eliot rebuilds one task from `trace` and the node programs' files beside it, and every
// action in it ended (succeeded or failed). Not eliot's is_complete(): the level ferry hands to the user's
// command stays empty when the command does not use eliot, which its parser cannot tell from a lost message.
bool every_action_ended(const fs::path& trace) {
  std::vector<fs::path> files{trace};
  const auto stem = trace.stem().string() + ".node-";
  for (const auto& e : fs::directory_iterator(trace.parent_path()))
    if (e.path().filename().string().rfind(stem, 0) == 0) files.push_back(e.path());
  const auto tasks = ferry::test::eliot_parse(files);
  if (tasks.size() != 1) return false;
  std::vector<const boost::json::object*> todo{&tasks[0].at("root").as_object()};
  while (!todo.empty()) {
    const auto* node = todo.back();
    todo.pop_back();
    if (!node->contains("action_type")) continue;
    const auto& status = node->at("status").as_string();
    if (status != "succeeded" && status != "failed") return false;
    for (const auto& c : node->at("children").as_array()) todo.push_back(&c.as_object());
  }
  return true;
}

// A cold `ferry run` (a fresh storage prefix, no hash cache, no node: ferry brings one up and fills its
// empty layer cache) interrupted with SIGINT at a random moment of its length, measured first without one.
void interrupt_cold_runs(int count) {
  run_setup setup;
  auto& options = setup.options;
  std::mt19937_64 rng(17);
  write_random(setup.ws / "a.bin", 24 << 20, rng);
  write_random(setup.ws / "b.bin", 24 << 20, rng);
  moto_server moto({.host = "10.200.0.1"});
  moto.make_bucket("cold");
  setup.use(moto);
  ferry::test::run_ferry({"nodes", "down", "--all"}, options);  // the setup's node: each run makes its own
  const std::vector<std::string> command{"run", "--nodes", "1", "--", "sh", "-c", "sleep 2; echo done"};
  auto cold_round = [&](const std::string& name, std::optional<double> interrupt_at) {
    fs::remove_all(setup.state / "cache");
    options.env["FERRY_STORAGE_URL"] = "s3://cold/" + name;
    const auto trace = setup.state / (name + ".jsonl");
    std::vector<std::string> args{"--trace", trace.string()};
    args.insert(args.end(), command.begin(), command.end());
    const auto namespaces_before = node_namespaces();
    const auto started = std::chrono::steady_clock::now();
    auto child = ferry::test::spawn_ferry(args, options);
    std::set<proc_id> seen;  // ferry's children (the interpreter probe) while it ran
    while (interrupt_at && std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() <
                               *interrupt_at &&
           !ferry::test::dead_or_zombie(child->pid())) {
      seen.merge(descendants(child->pid()));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const auto sent = std::chrono::steady_clock::now();
    if (interrupt_at) child->signal(SIGINT);
    const bool ended = ends_within_two_minutes(child->pid());
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    if (!ended) child->signal(SIGKILL);
    const auto r = child->wait();
    // Uninterrupted, the run's whole length; interrupted, when the signal came.
    const double whole = std::chrono::duration<double>(sent - started).count() + (interrupt_at ? 0 : took);
    std::this_thread::sleep_for(std::chrono::seconds(3));  // sshd ends a session whose client has gone
    int local_left = 0;
    for (const auto& p : seen) local_left += alive(p) && on_the_workstation(p.first) ? 1 : 0;
    const int unrecorded = unrecorded_nodes(setup.state.path(), namespaces_before);
    const auto remote_left = left_on_nodes();
    // A signal that comes before ferry opened its trace leaves none, which is whole in its way.
    const bool traced = fs::exists(trace);
    const bool whole_trace = !traced || every_action_ended(trace);
    for (const auto& p : seen)
      if (alive(p) && on_the_workstation(p.first))
        fmt::print("    left on the workstation: {}\n", ferry::test::read_file(fmt::format("/proc/{}/cmdline", p.first)));
    ferry::test::run_ferry({"nodes", "down", "--all"}, options);
    struct outcome {
      int exit_code;
      bool hung;
      double exit_after, run_length;
      int local_left, unrecorded;
      std::vector<std::string> remote_left;
      bool traced, whole_trace;
    };
    return outcome{r.exit_code, !ended, took, whole, local_left, unrecorded, remote_left, traced, whole_trace};
  };
  const auto calibration = cold_round("calibration", std::nullopt);
  if (calibration.exit_code != 0) throw std::runtime_error("the uninterrupted cold run failed");
  const double length = calibration.run_length;
  int interrupted = 0, finished = 0, other = 0, hangs = 0, over_3s = 0, local_orphans = 0, remote_orphans = 0,
      broken_traces = 0, untraced = 0, unrecorded = 0;
  double worst = 0;
  for (int i = 0; i < count; ++i) {
    const double at = std::uniform_real_distribution<double>(0, length)(rng);
    const auto o = cold_round(fmt::format("round-{}", i), at);
    (o.exit_code == 130 ? interrupted : o.exit_code == 0 ? finished : other) += 1;
    hangs += o.hung ? 1 : 0;
    over_3s += o.exit_after > 3 ? 1 : 0;
    worst = std::max(worst, o.exit_after);
    local_orphans += o.local_left;
    remote_orphans += static_cast<int>(o.remote_left.size());
    broken_traces += o.whole_trace ? 0 : 1;
    untraced += o.traced ? 0 : 1;
    unrecorded += o.unrecorded;
    fmt::print("  cold run round {}: SIGINT at {:.2f} s, exit {} {:.2f} s later{}{}\n", i + 1, at, o.exit_code,
               o.exit_after, o.local_left ? fmt::format(", {} local processes left", o.local_left) : "",
               o.whole_trace ? "" : ", trace not whole");
    for (const auto& p : o.remote_left) fmt::print("    left on a node: {}\n", p);
  }
  const auto left = multipart_uploads_left(moto, "cold");
  fmt::print("ctrl-c cold run: {} rounds over a cold run of {:.2f} s (2 x 24 MiB random files and a venv; a node "
             "brought up by the run; command 'sleep 2'): {} interrupted (exit 130), {} finished first, {} other "
             "exits, {} hangs, {} exits over 3 s, slowest {:.2f} s after SIGINT; {} multipart uploads left, {} "
             "processes left on the workstation, {} on the nodes (3 s after the exit), {} nodes running that "
             "the registry does not hold, {} traces (ferry's and the "
             "nodes' files) in which python3-eliot found an action that never ended ({} rounds ended before "
             "ferry opened its trace)\n",
             count, length, interrupted, finished, other, hangs, over_3s, worst, left, local_orphans, remote_orphans,
             unrecorded, broken_traces, untraced);
}

// Whether `text` holds a signature: X-Amz-Signature= and 64 hex digits (the name alone is in ferry's
// own binaries, in the list of what traces redact).
bool holds_signature(std::string_view text) {
  constexpr std::string_view name = "X-Amz-Signature=";
  for (auto at = text.find(name); at != std::string_view::npos; at = text.find(name, at + 1)) {
    const auto value = text.substr(at + name.size(), 64);
    if (value.size() == 64 && value.find_first_not_of("0123456789abcdef") == std::string_view::npos) return true;
  }
  return false;
}

// Where any of `needles`, or a signature, shows: files under a root, argv of processes.
struct exposure {
  std::vector<std::string> needles;
  std::set<std::string> hits;
  std::atomic<bool> watching{true};

  bool holds(std::string_view text) const {
    for (const auto& n : needles)
      if (text.find(n) != std::string_view::npos) return true;
    return holds_signature(text);
  }

  void scan_argv() {
    std::error_code ec;
    for (const auto& p : fs::directory_iterator("/proc", ec)) {
      const auto name = p.path().filename().string();
      if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
      const auto argv = ferry::test::read_file(p.path() / "cmdline");
      if (holds(argv)) hits.insert("argv: " + argv.substr(0, 80));
    }
  }
  void scan_files(const fs::path& root) {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      std::error_code e;
      if (!it->is_regular_file(e)) continue;
      if (holds(ferry::test::read_file(it->path()))) hits.insert("file: " + it->path().string());
    }
  }
};

void grep_for_secrets(int count) {
  run_setup setup;
  moto_server moto({.host = "10.200.0.1"});
  moto.make_bucket("secrets");
  setup.use(moto);
  // Credentials of this run's own (moto takes any without signature checking, which presigned URLs need):
  // a session token goes into every presigned URL the nodes fetch.
  const std::string secret_key = "bench+Secret/Access/Key/0123456789abcdefghij";
  const std::string token = "benchSessionTokenFQoGZXIvYXdzEJr" + std::string(40, 'T');
  const std::string env_value = "bench-env-value-s3cr3t";
  setup.options.env["AWS_SECRET_ACCESS_KEY"] = secret_key;
  setup.options.env["AWS_SESSION_TOKEN"] = token;
  setup.options.env["BENCH_SECRET"] = env_value;
  exposure seen;
  seen.needles = {secret_key, token, env_value};
  std::thread watcher([&] {
    while (seen.watching) {
      seen.scan_argv();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  int ok = 0;
  for (int i = 0; i < count; ++i) {
    setup.options.env["FERRY_STORAGE_URL"] = fmt::format("s3://secrets/round-{}", i);
    const auto trace = setup.state / fmt::format("run-{}.jsonl", i);
    // `--env NAME`: from ferry's environment (NAME=VALUE would sit in ferry's own argv until it is parsed).
    // The command checks the value's length, so that the value is in no argv of its own either.
    const auto r = ferry::test::run_ferry(
        {"--trace", trace.string(), "run", "--env", "BENCH_SECRET", "--", "sh", "-c",
         fmt::format("test ${{#BENCH_SECRET}} = {}", env_value.size())},
        setup.options);
    ok += r.exit_code == 0 ? 1 : 0;
  }
  seen.watching = false;
  watcher.join();
  // Traces (ferry's and the nodes'), the registry, caches, keys, the nodes' own directories and caches.
  seen.scan_files(setup.state.path());
  seen.scan_files(setup.ws.path());
  // The search itself is checked: a presigned URL written to a file must be found (its token and signature).
  temp_dir control;
  control.write("url", ferry::test::run_ferry({"storage", "presign", "s3://secrets/round-0"}, setup.options).out);
  exposure check;
  check.needles = {token};
  check.scan_files(control.path());
  const bool found = check.hits.size() == 1 && holds_signature(ferry::test::read_file(control / "url"));
  ferry::test::run_ferry({"nodes", "down", "--all"}, setup.options);
  if (!found) throw std::runtime_error("the secret search missed a presigned URL written to a file");
  fmt::print("secrets: {} runs ({} succeeded) with a secret key, a session token and an --env value; the key, "
             "the token, the value and any signature searched in the argv of "
             "every process watched every 2 ms, then every file under the state, cache, config and workspace "
             "dirs (traces and the local nodes' files included): {} hits\n",
             count, ok, seen.hits.size());
  for (const auto& h : seen.hits) fmt::print("  hit: {}\n", h);
}

}  // namespace

int main() {
  try {
    if (const int n = rounds("FERRY_BENCH_CUTS", 100)) cut_uploads(n);
    if (const int n = rounds("FERRY_BENCH_FREEZES", 20)) freeze_packs(n);
    if (const int n = rounds("FERRY_BENCH_INTERRUPTS", 50)) interrupt_packs(n);
    if (const int n = rounds("FERRY_BENCH_RUN_INTERRUPTS", 50)) interrupt_cold_runs(n);
    if (const int n = rounds("FERRY_BENCH_SSHD_KILLS", 20)) kill_sshd_during_runs(n);
    if (const int n = rounds("FERRY_BENCH_SECRET_RUNS", 5)) grep_for_secrets(n);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_faults: {}\n", e.what());
    return 1;
  }
  return 0;
}
