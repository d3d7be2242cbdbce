// `ferry cluster` end to end through the ferry binary, on local nodes (sshd in network namespaces) with
// moto_server as storage and Debian's python3-distributed as the engine: a workstation program's
// `distributed.Client()` maps 1,000 tasks over a 2-node cluster, each task importing a package that only
// the shipped workspace holds; a node ended mid-map loses no result and is replaced; a second `up` reuses
// the cluster; `cluster down` leaves no scheduler, worker, holder or node namespace behind.
//
// The project's venv holds distributed and what it imports (links into Debian's dist-packages, as a venv
// with dask installed would hold copies), so the nodes run Dask from the shipped layers.
#include "support/venv_closure.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include "local_run.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// Σ (x² + 1) for x in 0..n-1.
long long expected_sum(long long n) { return (n - 1) * n * (2 * n - 1) / 6 + n; }

class cluster_cli : public local_nodes {
 protected:
  cluster_cli() : local_nodes("ferry-cluster") {}

  void SetUp() override {
    local_nodes::SetUp();
    if (!moto_) return;
    make_project();
  }

  void TearDown() override {
    if (!moto_) return;
    run_ferry({"cluster", "down", "--all"}, env());
    local_nodes::TearDown();
  }

  void make_project() {
    write_file(project() / "wsmod" / "__init__.py", "def weight(x):\n    return x * x + 1\n");
    write_file(project() / ".gitignore", ".venv/\n");
    write_file(project() / "ferry.toml", "[packaging]\npython = \".venv/bin/python\"\n");
    // Each task sleeps a little, so that a node can be ended while they run.
    write_file(project() / "client.py",
               "import sys, time\n"
               "from distributed import Client\n"
               "def task(x, pause=float(sys.argv[2])):\n"
               "    import wsmod\n"
               "    time.sleep(pause)\n"
               "    return wsmod.weight(x)\n"
               "client = Client(timeout=60)\n"
               "import distributed\n"
               "print('workers run', sorted(set(client.run(lambda: distributed.__file__).values())), flush=True)\n"
               "futures = client.map(task, range(int(sys.argv[1])), pure=False)\n"
               "print('submitted', flush=True)\n"
               "if len(sys.argv) > 4: open(sys.argv[4], 'w').close()\n"
               "print('sum', sum(client.gather(futures)), flush=True)\n"
               "sys.exit(int(sys.argv[3]))\n");
    std::string why;
    const auto site_dir = make_venv(project() / ".venv", why);
    ASSERT_FALSE(site_dir.empty()) << why;
    const auto closure = run({"/usr/bin/python3", "-c", dask_closure_script});
    ASSERT_EQ(closure.exit_code, 0) << "python3-distributed is needed (scripts/setup.sh installs it): " << closure.err;
    ASSERT_GT(link_closure(closure.out, site_dir), 5) << closure.out;
  }

  fs::path records() const { return home_ / "state" / "ferry" / "clusters"; }

  process_options env() const override {
    auto o = local_nodes::env();
    o.unset_env.push_back("DASK_SCHEDULER_ADDRESS");
    return o;
  }

  json::object record(const std::string& name = "dask") const {
    return json::parse(read_file(records() / (name + ".json"))).as_object();
  }

  // Polls the cluster's record until `ok` holds, up to `limit`.
  template <class Ok>
  bool record_becomes(Ok ok, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (fs::exists(records() / "dask.json") && ok(record())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }
};

std::size_t workers_of(const json::object& r) { return r.at("nodes").as_array().size(); }

TEST_F(cluster_cli, a_client_maps_over_the_cluster_through_a_node_loss_then_reuse_and_down) {
  auto o = env();
  // 1,000 tasks of 30 ms on 2 workers: long enough to end a node while they run.
  const auto submitted = home_ / "submitted";
  auto child = spawn_ferry({"cluster", "run", "--nodes", "2", "--", "/usr/bin/python3", "client.py", "1000", "0.03",
                            "0", submitted.string()},
                           o);
  ASSERT_TRUE(record_becomes([](const json::object& r) { return r.at("status").as_string() == "ready"; },
                             std::chrono::seconds(240)))
      << read_file(records() / "dask.log");
  const auto ready = record();
  ASSERT_EQ(workers_of(ready), 2u) << json::serialize(ready);
  const std::string scheduler_node(ready.at("scheduler_node").as_string());
  std::string victim;
  for (const auto& n : ready.at("nodes").as_array())
    if (n.as_string() != scheduler_node) victim = n.as_string();
  ASSERT_FALSE(victim.empty());
  // Once the tasks are submitted and running, the node with only a worker ends under the map.
  for (int i = 0; i < 1200 && !fs::exists(submitted); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(submitted)) << "the client never submitted its tasks";
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(run_ferry({"nodes", "down", victim}, o).exit_code, 0);
  const auto r = child->wait();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << read_file(records() / "dask.log");
  EXPECT_TRUE(contains(r.out, fmt::format("sum {}\n", expected_sum(1000)))) << r.out;
  EXPECT_TRUE(contains(r.err, "scheduler tcp://127.0.0.1:")) << r.err;
  // The workers run distributed from the shipped layers in the nodes' cache, not the system's.
  EXPECT_TRUE(contains(r.out, "/ferry/layers/")) << r.out;
  EXPECT_FALSE(contains(r.out, "'/usr/lib/python3/dist-packages/distributed")) << r.out;

  // The lost worker is replaced: the cluster is back to 2 workers, the victim not among them.
  ASSERT_TRUE(record_becomes(
      [&](const json::object& rec) {
        if (workers_of(rec) != 2) return false;
        for (const auto& n : rec.at("nodes").as_array())
          if (n.as_string() == victim) return false;
        return true;
      },
      std::chrono::seconds(120)))
      << json::serialize(record()) << read_file(records() / "dask.log");

  // A second `up` reuses it, and a program's exit code is ferry's.
  const auto up = run_ferry({"cluster", "up", "--nodes", "2"}, o);
  EXPECT_EQ(up.exit_code, 0) << up.err;
  EXPECT_TRUE(contains(up.out, "(reused)")) << up.out;
  EXPECT_TRUE(contains(up.out, "dashboard: http://127.0.0.1:")) << up.out;
  const auto again = run_ferry({"cluster", "run", "--", "/usr/bin/python3", "client.py", "10", "0", "3"}, o);
  EXPECT_EQ(again.exit_code, 3) << again.out << again.err;
  EXPECT_TRUE(contains(again.out, fmt::format("sum {}\n", expected_sum(10)))) << again.out;
  EXPECT_TRUE(contains(again.err, "(reused)")) << again.err;
  const auto ls = run_ferry({"cluster", "ls"}, o);
  EXPECT_TRUE(contains(ls.out, "dask")) << ls.out;
  EXPECT_TRUE(contains(ls.out, "ready")) << ls.out;

  // The holder's trace: the scheduler, three registrations (the replacement's too), the loss and the
  // replacement, and the forwarded connections.
  std::string holder_trace;
  for (const auto& e : fs::directory_iterator(home_ / "state" / "ferry" / "traces"))
    if (contains(e.path().filename().string(), "cluster-hold")) holder_trace += read_file(e.path());
  const auto pid = ready.at("pid").as_int64();

  const auto down = run_ferry({"cluster", "down", "dask"}, o);
  EXPECT_EQ(down.exit_code, 0) << down.out << down.err;
  EXPECT_TRUE(contains(down.out, "ended cluster dask")) << down.out;
  EXPECT_TRUE(dead_or_zombie(static_cast<pid_t>(pid))) << "the holder still runs";
  EXPECT_EQ(processes_naming("distributed.cli"), std::vector<std::string>{});
  EXPECT_EQ(processes_naming("cluster hold"), std::vector<std::string>{});
  EXPECT_FALSE(fs::exists(records() / "dask.json"));
  // The nodes made for the cluster are ended: no namespace of theirs is left.
  const auto netns = run({"ip", "netns", "list"});
  const auto registry = read_file(home_ / "state" / "ferry" / "nodes.json");
  EXPECT_FALSE(contains(registry, "\"local-")) << registry;
  for (const auto& n : {victim, scheduler_node}) EXPECT_FALSE(contains(netns.out, "ferry-" + n)) << netns.out;

  for (const auto* step : {"ferry:cluster:scheduler_at", "ferry:cluster:worker_lost", "ferry:cluster:replace",
                           "ferry:cluster:ready", "ssh:forward"})
    EXPECT_TRUE(contains(holder_trace, step)) << step;
  std::size_t registered = 0;
  for (std::size_t at = 0; (at = holder_trace.find(action_types::cluster::registered, at)) != std::string::npos; ++at)
    ++registered;
  EXPECT_GE(registered, 3u);
}

TEST_F(cluster_cli, a_cluster_without_clients_for_the_idle_timeout_ends_and_its_remote_processes_with_it) {
  auto o = env();
  o.env["FERRY_NODES_IDLE_TIMEOUT"] = "10s";
  const auto up = run_ferry({"cluster", "up", "--nodes", "1"}, o);
  ASSERT_EQ(up.exit_code, 0) << up.err;
  const auto pid = record().at("pid").as_int64();
  // A client's connection keeps it alive past the idle timeout; once it is gone the idle clock starts.
  const auto client =
      run_ferry({"cluster", "run", "--", "/usr/bin/python3", "client.py", "40", "0.6", "0"}, o);  // 12 s or more
  EXPECT_EQ(client.exit_code, 0) << client.err;
  EXPECT_TRUE(contains(client.err, "(reused)")) << client.err;  // the cluster was still there for it
  EXPECT_FALSE(dead_or_zombie(static_cast<pid_t>(pid))) << "the cluster ended while a client was connected";
  for (int i = 0; i < 600 && !dead_or_zombie(static_cast<pid_t>(pid)); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(dead_or_zombie(static_cast<pid_t>(pid))) << "the idle cluster's holder still runs";
  EXPECT_FALSE(fs::exists(records() / "dask.json"));
  EXPECT_EQ(processes_naming("distributed.cli"), std::vector<std::string>{});
  std::string holder_trace;
  for (const auto& e : fs::directory_iterator(home_ / "state" / "ferry" / "traces"))
    if (contains(e.path().filename().string(), "cluster-hold")) holder_trace += read_file(e.path());
  EXPECT_TRUE(contains(holder_trace, action_types::cluster::idle)) << holder_trace.substr(0, 2000);
}

TEST_F(cluster_cli, a_cluster_whose_scheduler_cannot_start_fails_up_with_its_reason_and_leaves_nothing) {
  // The workspace's own `distributed` goes first on the nodes' path, and it is broken.
  write_file(project() / "distributed" / "__init__.py", "raise ImportError('this distributed is broken')\n");
  auto o = env();
  const auto up = run_ferry({"cluster", "up", "--nodes", "1"}, o);
  EXPECT_EQ(up.exit_code, 1) << up.out << up.err;
  EXPECT_TRUE(contains(up.err, "the scheduler on")) << up.err;
  EXPECT_TRUE(contains(up.err, "this distributed is broken")) << up.err;
  EXPECT_FALSE(fs::exists(records() / "dask.json"));
  EXPECT_EQ(processes_naming("cluster hold"), std::vector<std::string>{});
}

}  // namespace
}  // namespace ferry::test
