// Many short commands over SSH on local nodes, ferry against the OpenSSH tools people use today, side by
// side in one run on the same 4 nodes (each a real sshd that `ferry nodes up` made):
//   100 runs of `true` spread over 4 nodes:
//     ferry: one process, one session per node, 16 exec channels at a time (sessions opened in the time)
//     parallel-ssh -p 16 (pssh), with each node listed 25 times
//     plain ssh in a loop, one connection per run
//     GNU parallel -j16 over OpenSSH with ControlMaster (masters opened before the clock starts)
//   one `ferry exec --nodes N -- true` on a warm node vs `ssh node true`
// OpenSSH uses ferry's own key and curve25519-sha256, as the nodes' sshd asks.
#include "bench/bench_support.hpp"
#include "config/loader.hpp"
#include "net/cancellation.hpp"
#include "net/run_all.hpp"
#include "net/ssh_connect.hpp"
#include "net/ssh_exec.hpp"
#include "provision/node_registry.hpp"
#include "tracing/action.hpp"
#include "tracing/sink.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

using namespace ferry;
namespace fs = std::filesystem;
namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;
using bench::best_of;
using bench::quote;
using bench::shell;

namespace {

constexpr int runs = 100;
constexpr int node_count = 4;
constexpr int jobs = 16;

// A private XDG world for ferry: its key, known_hosts, registry and nodes; the nodes end with it.
struct world {
  fs::path dir = fs::temp_directory_path() / fmt::format("ferry-bench-exec-{}", ::getpid());
  std::string ferry;
  std::string env;

  explicit world(std::string binary) : ferry(std::move(binary)) {
    fs::create_directories(dir);
    for (const char* name : {"XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"}) {
      const auto d = dir / name;
      ::setenv(name, d.c_str(), 1);
      env += fmt::format("{}={} ", name, quote(d.string()));
    }
    ::setenv("FERRY_PROVIDER", "local", 1);
  }
  ~world() {
    std::system(fmt::format("{} -q nodes down --all > /dev/null", quote(ferry)).c_str());
    fs::remove_all(dir);
  }
};

std::vector<provision::node> registry_nodes(const world& w) {
  const auto file = w.dir / "XDG_STATE_HOME" / "ferry" / "nodes.json";
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  diagnostics diag;
  auto nodes = provision::parse_registry(text.str(), file, diag);
  if (!nodes) throw std::runtime_error(diag.message);
  return *nodes;
}

config::settings settings() {
  config::load_options o;
  diagnostics diag;
  auto loaded = config::load(o, diag);
  if (!loaded) throw std::runtime_error(diag.message);
  return loaded->values;
}

// ferry's SSH layer: a session per node, then `runs` commands, `jobs` at a time, round-robin over nodes.
double ferry_many(tracing::action& root, const std::vector<provision::node>& nodes, double& connect_time) {
  connect_time = 1e9;
  return best_of(3, [&] {
    const auto start = clock_type::now();
    auto connected = start;
    asio::io_context io(1);
    auto work = [&]() -> asio::awaitable<void> {
      const auto options = net::ssh_client_options::from(settings());
      std::vector<std::shared_ptr<net::ssh_session>> sessions(nodes.size());
      std::vector<asio::awaitable<void>> connects;
      auto connect_one = [&](std::size_t i) -> asio::awaitable<void> {
        diagnostics diag;
        // Named: GCC 12 destroys a braced temporary in a co_await expression twice.
        net::ssh_peer peer{nodes[i].id, nodes[i].host, nodes[i].port, nodes[i].user};
        auto s = co_await net::ssh_connect(root, std::move(peer), options, diag);
        if (!s) throw std::runtime_error(diag.message);
        sessions[i] = *s;
      };
      for (std::size_t i = 0; i < nodes.size(); ++i) connects.push_back(connect_one(i));
      co_await net::run_all(std::move(connects));
      connected = clock_type::now();
      int next = 0;
      auto worker = [&]() -> asio::awaitable<void> {
        while (next < runs) {
          auto& session = *sessions[static_cast<std::size_t>(next++) % sessions.size()];
          diagnostics diag;
          auto r = co_await net::run_command(root, session, "true", diag);
          if (!r || !r->exit.success()) throw std::runtime_error("ferry: true failed: " + diag.message);
        }
      };
      std::vector<asio::awaitable<void>> workers;
      for (int j = 0; j < jobs; ++j) workers.push_back(worker());
      co_await net::run_all(std::move(workers));
      for (auto& s : sessions) s->close();
    };
    auto done = asio::co_spawn(io, work(), asio::use_future);
    io.run();
    done.get();
    connect_time = std::min(connect_time, std::chrono::duration<double>(connected - start).count());
  });
}

}  // namespace

int run(world& w);

int main() {
  // Caught here, so that the world's destructor ends the nodes even when a peer fails.
  world w(bench::ferry_binary().string());
  try {
    return run(w);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_exec: {}\n", e.what());
    return 1;
  }
}

int run(world& w) {
  shell(fmt::format("{} -q nodes up {} > /dev/null", quote(w.ferry), node_count));
  const auto nodes = registry_nodes(w);
  if (nodes.size() != node_count) throw std::runtime_error("nodes up made the wrong number of nodes");
  const auto key = (w.dir / "XDG_CONFIG_HOME" / "ferry" / "id_ed25519").string();
  const auto ssh_options = fmt::format(
      "-i {} -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
      "-o KexAlgorithms=curve25519-sha256 -o BatchMode=yes",
      quote(key));
  auto target = [&](const provision::node& n) { return fmt::format("-p {} {}@{}", n.port, n.user, n.host); };

  diagnostics diag;
  auto sink = tracing::sink::open(w.dir / "bench.jsonl", diag);
  if (!sink) throw std::runtime_error(diag.message);
  auto root = tracing::action::start_task(**sink, "bench:exec");

  double connect_time = 0;
  const double ferry = ferry_many(root, nodes, connect_time);

  // parallel-ssh: a hosts file with each node 25 times.
  const auto hosts = w.dir / "hosts";
  {
    std::ofstream out(hosts);
    for (int i = 0; i < runs; ++i) {
      const auto& n = nodes[static_cast<std::size_t>(i) % nodes.size()];
      out << fmt::format("{}@{}:{}\n", n.user, n.host, n.port);
    }
  }
  const double pssh = best_of(3, [&] {
    shell(fmt::format("parallel-ssh -h {} -p {} -O IdentitiesOnly=yes -O StrictHostKeyChecking=no "
                      "-O UserKnownHostsFile=/dev/null -O LogLevel=ERROR -O KexAlgorithms=curve25519-sha256 "
                      "-x '-i {}' true > /dev/null",
                      quote(hosts.string()), jobs, key));
  });

  const double loop = best_of(1, [&] {
    for (int i = 0; i < runs; ++i) {
      shell(fmt::format("ssh {} {} true", ssh_options, target(nodes[static_cast<std::size_t>(i) % nodes.size()])));
    }
  });

  // GNU parallel over ControlMaster connections opened beforehand: the strongest OpenSSH set-up.
  const auto control = w.dir / "cm-%C";
  const auto mux = fmt::format("{} -o ControlMaster=auto -o ControlPath={} -o ControlPersist=60", ssh_options,
                               quote(control.string()));
  for (const auto& n : nodes) shell(fmt::format("ssh {} {} true", mux, target(n)));
  const auto targets = w.dir / "targets";
  const auto one = w.dir / "ssh_one.sh";
  {
    std::ofstream out(targets);
    for (int i = 0; i < runs; ++i) {
      const auto& n = nodes[static_cast<std::size_t>(i) % nodes.size()];
      out << fmt::format("{} {}@{}\n", n.port, n.user, n.host);
    }
    std::ofstream(one) << fmt::format("exec ssh {} -p \"$1\" \"$2\" true\n", mux);
  }
  const double gnu = best_of(3, [&] {
    shell(fmt::format("parallel -j{} --will-cite --colsep ' ' sh {} {{1}} {{2}} :::: {}", jobs, quote(one.string()),
                      quote(targets.string())));
  });
  for (const auto& n : nodes) std::system(fmt::format("ssh {} -O exit {} 2>/dev/null", mux, target(n)).c_str());

  // One command on one warm node, each tool starting from nothing: the ferry binary vs the ssh binary.
  const auto& first = nodes.front();
  const double ferry_one = best_of(10, [&] {
    shell(fmt::format("{} -q exec --nodes {} -- true", quote(w.ferry), first.id));
  });
  const double ssh_one = best_of(10, [&] { shell(fmt::format("ssh {} {} true", ssh_options, target(first))); });
  root.succeed();

  fmt::print("{} runs of `true` over {} local nodes, {} at a time\n", runs, node_count, jobs);
  fmt::print("  ferry (one process, a session per node)       {:7.3f} s   (of which opening the 4 sessions {:.3f} s)\n",
             ferry, connect_time);
  fmt::print("  parallel-ssh -p {}                            {:7.3f} s   ferry is {:5.1f}x faster (goal >= 10x)\n",
             jobs, pssh, pssh / ferry);
  fmt::print("  ssh in a loop                                 {:7.3f} s   ferry is {:5.1f}x faster\n", loop,
             loop / ferry);
  fmt::print("  GNU parallel -j{} + ControlMaster (warm)      {:7.3f} s   ratio {:5.2f}x (goal <= 1.0x)\n", jobs, gnu,
             ferry / gnu);
  fmt::print("one command on a warm node\n");
  fmt::print("  ferry exec -- true                            {:7.3f} s\n", ferry_one);
  fmt::print("  ssh node true                                 {:7.3f} s   ratio {:5.2f}x (goal <= 1.2x)\n", ssh_one,
             ferry_one / ssh_one);
  return 0;
}
