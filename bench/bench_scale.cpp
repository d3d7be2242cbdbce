// ferry at scale against GNU parallel, side by side in one run on the same 64 local nodes (each a real sshd in
// its own network namespace that `ferry nodes up 64` made):
//   nodes up     `ferry nodes up 64`: wall time, CPU and peak RSS of the ferry process.
//   ferry map    10,000 `true` tasks, `ferry map --nodes 64 --range 1..10000 --concurrency 16 -- true`, on a
//                project whose venv holds nothing (the environment is one small layer). A warm-up map of 1,024
//                tasks first, so that the pack, the storage and every node's environment are in place: the
//                measured runs find everything cached, as a second run does. Tasks per second (from ferry's
//                start to its exit, which includes opening one SSH session per node, and from its "ready"),
//                CPU (user + sys) and peak RSS of the ferry process, per task and per node, against the goal
//                "RSS < 1 MiB per node + 2 KiB per queued task". Also a 1,024-task map (one task per slot: all
//                64 nodes, no queue; map starts no more nodes than tasks / 16) for the RSS of the nodes alone,
//                and `ferry nodes ls` for a process that only loads the configuration and the registry.
//   parallel     GNU parallel running the same 10,000 `true` over OpenSSH with ControlMaster connections to the
//                same 64 nodes (ferry's key; the 64 masters opened before the clock starts, as ferry's sessions
//                to warm nodes are not), 16 job slots per node: `parallel -j 16 --sshloginfile FILE true`, each
//                line `16/ssh -F CONFIG nI`. (GNU parallel's -j is per machine: -j 1024 would be 1024 slots on
//                each node.) CPU of parallel itself (the peer's "agent"), of the ssh clients it ran, and of the
//                64 masters (the peer's sessions). parallel wraps each remote command in a Perl worker on the
//                node, so a second peer runs the same tasks as local commands `ssh -F CONFIG nI true` through the
//                same masters, `parallel -j 1024`, input I to node I mod 64: no wrapper, OpenSSH's cheapest path.
// For every measured run also the whole machine's busy CPU (/proc/stat): the nodes' sshd, the commands and, for
// parallel, the Perl wrapper it runs on the node around each command, all share the machine's cores (and so
// does anything else that runs meanwhile: check the load printed beside each round).
// The figures of each case are of its fastest round; FERRY_BENCH_ROUNDS rounds (default 2), ferry and the two
// peers taking turns. Everything ends with the world: masters closed, nodes down, moto_server killed.
#include "bench/bench_support.hpp"
#include "bench/bench_world.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace json = boost::json;
using ferry::bench::field;
using ferry::bench::first_line;
using ferry::bench::output_of;
using ferry::bench::quote;
using ferry::bench::shell;

namespace {

constexpr int node_count = 64;
constexpr int per_node = 16;
constexpr int tasks = 10000;
constexpr int warm_up_tasks = 1024;

struct node {
  std::string id, host, user;
  int port = 22;
};

struct world : ferry::bench::node_world {
  fs::path project = dir / "project";
  fs::path out = dir / "out";
  fs::path ssh_config = dir / "ssh_config";
  fs::path logins = dir / "sshlogins";
  fs::path parallel_home = dir / "parallel-home";
  std::vector<node> nodes;
  bool masters_open = false;

  explicit world(std::string binary) : node_world("scale", std::move(binary)) {
    fs::create_directories(out);
    fs::create_directories(parallel_home);
    ::setenv("FERRY_NODES_MAX_NODES", std::to_string(node_count).c_str(), 1);
    ::setenv("FERRY_NODES_READY_TIMEOUT", "60s", 1);
    ::setenv("FERRY_STORAGE_URL", "s3://bench/scale", 1);
  }
  ~world() { close_masters(); }

  std::string host_alias(std::size_t i) const { return fmt::format("n{}", i); }
  void close_masters() {
    if (!masters_open) return;
    for (std::size_t i = 0; i < nodes.size(); ++i)
      std::system(fmt::format("ssh -F {} -O exit {} > /dev/null 2>&1", quote(ssh_config), host_alias(i)).c_str());
    masters_open = false;
  }
};

// ---- One measured process ----

struct usage {
  double wall = 0;
  double own_cpu = 0;       // the process itself: utime + stime
  double children_cpu = 0;  // the children it waited for
  long max_rss_kib = 0;     // wait4's ru_maxrss: the largest of the process and those children
  double machine_cpu = 0;   // every core's busy time meanwhile (/proc/stat), in CPU seconds
  std::string load_before, load_after;  // the 1-minute load average as it started and ended
  double cpu() const { return own_cpu + children_cpu; }
};

// Busy CPU seconds of the whole machine so far (every state but idle and iowait).
double machine_busy() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;
  double total = 0, idle = 0, v;
  for (int i = 0; i < 10 && in >> v; ++i) {
    if (i == 8 || i == 9) continue;  // guest time is already in user
    total += v;
    if (i == 3 || i == 4) idle += v;
  }
  return (total - idle) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The 1-minute load average.
std::string load_1m() {
  std::ifstream in("/proc/loadavg");
  std::string l;
  in >> l;
  return l;
}

// utime + stime, and cutime + cstime, of a process from /proc/PID/stat, in seconds.
std::pair<double, double> stat_cpu(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return {0, 0};
  std::istringstream rest(text.substr(close + 2));
  std::vector<std::string> f;
  for (std::string w; rest >> w;) f.push_back(w);
  if (f.size() < 15) return {0, 0};
  // After the name: state (field 3) is f[0], so utime (field 14) is f[11].
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return {(std::stod(f[11]) + std::stod(f[12])) / tick, (std::stod(f[13]) + std::stod(f[14])) / tick};
}

// Runs `sh -c 'exec COMMAND'` in `cwd` with `env` added: the measured process is COMMAND's program itself.
// Its own CPU is read from /proc while it is a zombie (waitid with WNOWAIT), then wait4 reaps it. A failure
// ends the bench, with the end of `log` (the command's stderr) when there is one.
usage measure(const std::string& command, const fs::path& cwd = {}, const std::map<std::string, std::string>& env = {},
              const fs::path& log = {}) {
  usage u;
  u.load_before = load_1m();
  const double busy = machine_busy();
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    const auto line = "exec " + command;
    ::execl("/bin/sh", "sh", "-c", line.c_str(), nullptr);
    ::_exit(127);
  }
  siginfo_t info{};
  ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT);
  u.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  u.machine_cpu = machine_busy() - busy;
  u.load_after = load_1m();
  const auto [own, children] = stat_cpu(pid);
  u.own_cpu = own;
  u.children_cpu = children;
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  u.max_rss_kib = ru.ru_maxrss;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string said;
    if (!log.empty()) {
      std::ifstream in(log);
      said.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (said.size() > 4000) said = "..." + said.substr(said.size() - 4000);
    }
    throw std::runtime_error(fmt::format("failed (status {:#x}): {}\n{}", status, command, said));
  }
  return u;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The line of ferry's stderr that holds `part`.
std::string line_with(const std::string& text, const std::string& part) {
  const auto at = text.rfind(part);
  if (at == std::string::npos) throw std::runtime_error(fmt::format("no \"{}\" in:\n{}", part, text));
  const auto start = text.rfind('\n', at);
  return first_line(text.substr(start == std::string::npos ? 0 : start + 1));
}

std::vector<node> registry(const world& w) {
  const auto doc = json::parse(read_text(w.dir / "XDG_STATE_HOME" / "ferry" / "nodes.json"));
  std::vector<node> out;
  for (const auto& v : doc.at("nodes").as_array()) {
    const auto& n = v.as_object();
    if (n.at("state").as_string() != "running") continue;
    out.push_back({std::string(n.at("id").as_string()), std::string(n.at("host").as_string()),
                   std::string(n.at("user").as_string()), static_cast<int>(n.at("port").to_number<std::int64_t>())});
  }
  return out;
}

void make_project(const world& w) {
  fs::create_directories(w.project);
  std::ofstream(w.project / "main.py") << "print('hi')\n";
  std::ofstream(w.project / ".gitignore") << ".venv/\n";
  std::ofstream(w.project / "ferry.toml") << "[packaging]\npython = \".venv/bin/python\"\n";
  shell(fmt::format("/usr/bin/python3 -m venv --without-pip {}", quote(w.project / ".venv")));
}

// ---- ferry ----

struct ferry_run {
  usage u;
  std::string summary, startup;  // ferry's own lines on stderr
  double ready = 0;              // "ready in X s": the sessions open, the environment checked
};

ferry_run ferry_map(world& w, int count, const std::string& name) {
  const auto results = w.out / (name + ".jsonl");
  const auto err = w.out / (name + ".stderr");
  ferry_run r;
  r.u = measure(fmt::format("{} map --nodes {} --range 1..{} --concurrency {} -- true > {} 2> {}", quote(w.ferry),
                            node_count, count, per_node, quote(results), quote(err)),
                w.project, {}, err);
  // Every task once, every one ok.
  std::ifstream in(results);
  std::vector<char> seen(static_cast<std::size_t>(count), 0);
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    const auto t = json::parse(line).as_object();
    const auto i = t.at("task").to_number<std::int64_t>();
    if (i < 0 || i >= count || seen[static_cast<std::size_t>(i)] || !t.at("ok").as_bool())
      throw std::runtime_error(fmt::format("{}: a wrong result line: {}", name, line));
    seen[static_cast<std::size_t>(i)] = 1;
    ++lines;
  }
  if (lines != count) throw std::runtime_error(fmt::format("{}: {} result lines for {} tasks", name, lines, count));
  const auto text = read_text(err);
  r.summary = line_with(text, "tasks:");
  r.startup = line_with(text, "ready in");
  r.ready = field(r.startup, "ready in");
  return r;
}

// ---- GNU parallel over ControlMaster connections ----

void write_ssh_files(world& w) {
  const auto key = w.dir / "XDG_CONFIG_HOME" / "ferry" / "id_ed25519";
  if (!fs::exists(key)) throw std::runtime_error("no ferry key at " + key.string());
  std::ofstream cfg(w.ssh_config);
  cfg << fmt::format(
      "Host *\n  IdentityFile {}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
      "  LogLevel ERROR\n  KexAlgorithms curve25519-sha256\n  BatchMode yes\n  ControlMaster auto\n"
      "  ControlPath {}\n  ControlPersist 1200\n",
      key.string(), (w.dir / "cm-%C").string());
  std::ofstream logins(w.logins);
  for (std::size_t i = 0; i < w.nodes.size(); ++i) {
    const auto& n = w.nodes[i];
    cfg << fmt::format("Host {}\n  HostName {}\n  Port {}\n  User {}\n", w.host_alias(i), n.host, n.port, n.user);
    logins << fmt::format("{}/ssh -F {} {}\n", per_node, w.ssh_config.string(), w.host_alias(i));
  }
}

// Opens the 64 masters (in the background, as ControlPersist leaves them); returns their pids.
std::vector<pid_t> open_masters(world& w) {
  std::string hosts;
  for (std::size_t i = 0; i < w.nodes.size(); ++i) hosts += " " + w.host_alias(i);
  w.masters_open = true;
  shell(fmt::format("for h in{}; do ssh -F {} $h true & done; wait", hosts, quote(w.ssh_config)));
  std::vector<pid_t> pids;
  for (std::size_t i = 0; i < w.nodes.size(); ++i) {
    const auto said = output_of(fmt::format("ssh -F {} -O check {} 2>&1", quote(w.ssh_config), w.host_alias(i)));
    const auto at = said.find("pid=");
    if (at == std::string::npos) throw std::runtime_error("no master for " + w.host_alias(i) + ": " + said);
    pids.push_back(std::stoi(said.substr(at + 4)));
  }
  return pids;
}

double masters_cpu(const std::vector<pid_t>& pids) {
  double s = 0;
  for (const auto pid : pids) s += stat_cpu(pid).first;
  return s;
}

struct parallel_run {
  usage u;
  double masters = 0;  // CPU of the 64 ssh masters meanwhile
};

// How GNU parallel reaches the nodes.
enum class peer {
  // --sshloginfile, 16 slots per node: parallel runs `ssh -F CONFIG nI -- exec perl -e ...` for each task, its
  // own Perl wrapper around the command on the node (it writes the command to a script in the node's /tmp,
  // runs it in a process group of its own and passes signals on).
  sshlogin,
  // The tasks are local commands `ssh -F CONFIG nI true`, input I going to node I mod 64, 1,024 at a time:
  // no wrapper on the node, the cheapest way OpenSSH runs a command.
  plain_ssh,
};

parallel_run gnu_parallel(world& w, const std::vector<pid_t>& masters, peer how, int count, const std::string& name) {
  const auto input = w.out / (name + ".in");
  {
    std::ofstream in(input);
    for (int i = 0; i < count; ++i) {
      if (how == peer::sshlogin) in << i + 1 << "\n";
      else in << w.host_alias(static_cast<std::size_t>(i) % w.nodes.size()) << "\n";
    }
  }
  const auto command =
      how == peer::sshlogin
          ? fmt::format("parallel --will-cite -j {} --sshloginfile {} true", per_node, quote(w.logins))
          : fmt::format("parallel --will-cite -j {} ssh -F {} {{}} true", per_node * node_count, quote(w.ssh_config));
  parallel_run r;
  const double before = masters_cpu(masters);
  // HOME: parallel keeps its per-host probes (line length, ...) under ~/.parallel; the warm-up fills them.
  const auto err = w.out / (name + ".stderr");
  r.u = measure(fmt::format("{} < {} > {} 2> {}", command, quote(input), quote(w.out / (name + ".out")), quote(err)), {},
                {{"HOME", w.parallel_home.string()}}, err);
  r.masters = masters_cpu(masters) - before;
  return r;
}

// ---- Report ----

std::string load() { return first_line(output_of("uptime")); }

void print_usage(const char* what, const usage& u) {
  fmt::print("  {:<44} wall {:6.2f} s, CPU {:5.2f} s (own {:5.2f} + children {:5.2f}), peak RSS {:7} KiB; "
             "machine busy {:5.2f} CPU s; load {} -> {}\n",
             what, u.wall, u.cpu(), u.own_cpu, u.children_cpu, u.max_rss_kib, u.machine_cpu, u.load_before,
             u.load_after);
}

int run(world& w) {
  const int rounds = std::getenv("FERRY_BENCH_ROUNDS") ? std::max(1, std::atoi(std::getenv("FERRY_BENCH_ROUNDS"))) : 2;
  fmt::print("before: {}\n", load());
  std::fflush(stdout);
  make_project(w);

  // nodes up 64 (the first node makes the bridge moto_server listens on, when there is none yet).
  const auto up = measure(fmt::format("{} -q nodes up {} > /dev/null", quote(w.ferry), node_count));
  w.nodes = registry(w);
  if (w.nodes.size() != node_count) throw std::runtime_error(fmt::format("{} nodes running", w.nodes.size()));
  w.start_moto();
  const auto ls = measure(fmt::format("{} nodes ls > /dev/null", quote(w.ferry)));

  // Warm-ups: ferry's pack, storage and node environments; parallel's per-host probes.
  const auto warm = ferry_map(w, warm_up_tasks, "ferry-warm");
  const auto few = ferry_map(w, node_count * per_node, "ferry-1024");
  write_ssh_files(w);
  const auto masters = open_masters(w);
  const auto parallel_warm = gnu_parallel(w, masters, peer::sshlogin, warm_up_tasks, "parallel-warm");

  std::vector<ferry_run> ferry_runs;
  std::vector<parallel_run> sshlogin_runs, plain_runs;
  for (int r = 0; r < rounds; ++r) {
    ferry_runs.push_back(ferry_map(w, tasks, fmt::format("ferry-{}", r)));
    sshlogin_runs.push_back(gnu_parallel(w, masters, peer::sshlogin, tasks, fmt::format("parallel-{}", r)));
    plain_runs.push_back(gnu_parallel(w, masters, peer::plain_ssh, tasks, fmt::format("parallel-ssh-{}", r)));
    fmt::print("round {}: ferry {:.2f} s ({:.0f} tasks/s), parallel --sshloginfile {:.2f} s ({:.0f} tasks/s), "
               "parallel ssh {:.2f} s ({:.0f} tasks/s); {}\n",
               r + 1, ferry_runs.back().u.wall, tasks / ferry_runs.back().u.wall, sshlogin_runs.back().u.wall,
               tasks / sshlogin_runs.back().u.wall, plain_runs.back().u.wall, tasks / plain_runs.back().u.wall, load());
    std::fflush(stdout);
  }
  w.close_masters();
  const auto down = measure(fmt::format("{} -q nodes down --all > /dev/null", quote(w.ferry)));
  fmt::print("after: {}\n\n", load());

  const auto& f = *std::min_element(ferry_runs.begin(), ferry_runs.end(),
                                    [](const ferry_run& a, const ferry_run& b) { return a.u.wall < b.u.wall; });
  auto fastest = [](const std::vector<parallel_run>& runs) -> const parallel_run& {
    return *std::min_element(runs.begin(), runs.end(),
                             [](const parallel_run& a, const parallel_run& b) { return a.u.wall < b.u.wall; });
  };
  const auto& ps = fastest(sshlogin_runs);
  const auto& pp = fastest(plain_runs);

  fmt::print("{} local nodes, {} tasks of `true`, {} at a time per node; fastest of {} rounds\n", node_count, tasks,
             per_node, rounds);
  fmt::print("nodes\n");
  print_usage("ferry nodes up 64", up);
  print_usage("ferry nodes ls (64 nodes)", ls);
  print_usage("ferry nodes down --all (64 nodes)", down);
  fmt::print("ferry map (warm nodes; own = the ferry process, children = what it ran on this machine)\n");
  print_usage("warm-up map of 1,024 tasks (packs, env)", warm.u);
  fmt::print("    {}\n", warm.startup);
  print_usage("map of 1,024 tasks (one per slot)", few.u);
  print_usage("map of 10,000 tasks", f.u);
  fmt::print("    {}\n    {}\n", f.summary, f.startup);
  const double rate = tasks / f.u.wall;
  const double rate_ready = tasks / (f.u.wall - f.ready);
  const double budget_kib = node_count * 1024.0 + tasks * 2.0;
  fmt::print("  rate {:.0f} tasks/s from start to exit; {:.0f} tasks/s after ready ({:.2f} s)\n", rate, rate_ready,
             f.ready);
  fmt::print("  CPU {:.3f} ms per task (ferry's own {:.3f} ms)\n", 1000 * f.u.cpu() / tasks,
             1000 * f.u.own_cpu / tasks);
  fmt::print("  peak RSS {} KiB = {:.1f} KiB per node, or {:.2f} KiB per task; goal < 1 MiB per node + 2 KiB per "
             "queued task = {:.0f} KiB: {} ({:.2f}x of it)\n",
             f.u.max_rss_kib, f.u.max_rss_kib / double(node_count), f.u.max_rss_kib / double(tasks), budget_kib,
             f.u.max_rss_kib < budget_kib ? "met" : "MISSED", f.u.max_rss_kib / budget_kib);
  fmt::print("  RSS: 10,000 tasks {} KiB, 1,024 tasks {} KiB, nodes ls {} KiB: {:.2f} KiB per task beyond the "
             "1,024-task run, {:.1f} KiB per node beyond nodes ls\n",
             f.u.max_rss_kib, few.u.max_rss_kib, ls.max_rss_kib,
             (f.u.max_rss_kib - few.u.max_rss_kib) / double(tasks - node_count * per_node),
             (few.u.max_rss_kib - ls.max_rss_kib) / double(node_count));

  auto report = [&](const char* title, const parallel_run* warm_up, const parallel_run& p) {
    fmt::print("{}\n", title);
    if (warm_up) print_usage("warm-up of 1,024 tasks", warm_up->u);
    print_usage("10,000 tasks", p.u);
    const double prate = tasks / p.u.wall;
    fmt::print("  rate {:.0f} tasks/s\n", prate);
    fmt::print("  CPU: parallel itself {:.2f} s ({:.3f} ms per task), its ssh clients {:.2f} s, the 64 masters "
               "{:.2f} s; in all {:.3f} ms per task\n",
               p.u.own_cpu, 1000 * p.u.own_cpu / tasks, p.u.children_cpu, p.masters,
               1000 * (p.u.cpu() + p.masters) / tasks);
    fmt::print("  ferry / this peer: task rate {:.2f}x (goal >= 2x: {}), after ready {:.2f}x; agent CPU (ferry / "
               "parallel itself) {:.3f}x; workstation CPU (ferry / parallel + ssh + masters) {:.3f}x; machine busy "
               "CPU per task {:.3f} ms vs {:.3f} ms ({:.2f}x); peak RSS {} KiB vs {} KiB ({:.2f}x)\n",
               rate / prate, rate / prate >= 2 ? "met" : "MISSED", rate_ready / prate, f.u.cpu() / p.u.own_cpu,
               f.u.cpu() / (p.u.cpu() + p.masters), 1000 * f.u.machine_cpu / tasks, 1000 * p.u.machine_cpu / tasks,
               f.u.machine_cpu / p.u.machine_cpu, f.u.max_rss_kib, p.u.max_rss_kib,
               double(f.u.max_rss_kib) / p.u.max_rss_kib);
  };
  report("GNU parallel -j 16 --sshloginfile (16/ssh -F CONFIG nI) over ControlMaster, masters opened beforehand",
         &parallel_warm, ps);
  report("GNU parallel -j 1024 'ssh -F CONFIG nI true' (local ssh commands, no wrapper on the node), same masters",
         nullptr, pp);
  auto walls = [](const auto& runs) {
    std::string out;
    for (const auto& r : runs) out += fmt::format(" {:.2f} s", r.u.wall);
    return out;
  };
  fmt::print("all rounds: ferry{}; parallel --sshloginfile{}; parallel ssh{}\n", walls(ferry_runs),
             walls(sshlogin_runs), walls(plain_runs));
  return 0;
}

}  // namespace

int main() { return ferry::bench::bench_main<world>("bench_scale", run); }
