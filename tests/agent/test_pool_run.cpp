// `ferry run` on a team's pool (pool.name) end to end: tenants that share nothing but storage (each its
// own HOME, so its own config, key, state and cache) lease the slots of local nodes (sshd in network
// namespaces) from records in moto_server, which answers one request at a time (moto checks If-Match
// and stores without a lock; S3 does both at once).
#include "agent/pool/pool_invariants.hpp"
#include "agent/pool/pool_record.hpp"
#include "tracing/action_types.hpp"

#include "local_run.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <map>
#include <memory>
#include <set>
#include <thread>

namespace ferry::test::pool_run_tests {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

// One lease as the agent's trace tells it: taken at the acquire's end, given back at the release's start.
struct traced_lease {
  std::string node;
  std::string tenant;
  std::string id;
  bool joined = false;
  double taken = 0;
  double given_back = -1;  // < 0: never given back
  std::int64_t waits = 0;
};

std::vector<traced_lease> leases_in(const fs::path& trace) {
  std::map<std::string, traced_lease> by_action;  // acquire's action key -> lease
  std::map<std::string, std::string> tenant_of;   // acquire's action key -> its tenant
  std::map<std::string, traced_lease*> by_id;
  std::vector<traced_lease> out;
  const auto lines = trace_file_lines(trace);
  for (const auto& o : lines) {
    const auto type = trace_type(o);
    const auto status = trace_text(o, "action_status");
    if (type == action_types::pool::acquire && status == "started") {
      tenant_of[trace_action_key(o)] = trace_text(o, "tenant");
      by_action[trace_action_key(o)].id = trace_text(o, "lease");
    }
    if (type == action_types::pool::acquire && status == "succeeded") {
      auto& l = by_action[trace_action_key(o)];
      l.node = trace_text(o, "node");
      l.tenant = tenant_of[trace_action_key(o)];
      l.joined = o.at("joined").as_bool();
      l.waits = o.at("waits").as_int64();
      l.taken = o.at("timestamp").as_double();
      out.push_back(l);
    }
  }
  for (auto& l : out) by_id[l.id] = &l;
  for (const auto& o : lines)
    if (trace_type(o) == action_types::pool::release && trace_text(o, "action_status") == "started")
      if (auto it = by_id.find(trace_text(o, "lease")); it != by_id.end())
        it->second->given_back = o.at("timestamp").as_double();
  return out;
}

std::size_t started(const std::vector<json::object>& lines, std::string_view type) {
  std::size_t n = 0;
  for (const auto& o : lines)
    if (trace_type(o) == type && trace_text(o, "action_status") == "started") ++n;
  return n;
}

class pool_run : public local_nodes {
 protected:
  struct tenant {
    std::string name;
    std::unique_ptr<temp_dir> home;
    std::unique_ptr<local_node_guard> guard;
    std::unique_ptr<local_node_guard> pool_guard;  // the nodes its agent made for the pool
    fs::path project() const { return home->path() / "project"; }
  };

  pool_run() : local_nodes() {}

  void SetUp() override {
    local_nodes::SetUp();
    if (IsSkipped()) return;
    ASSERT_TRUE(start_storage(true));
    for (const auto* name : {"ann", "bob", "cat"}) {
      tenant t{name, std::make_unique<temp_dir>(), nullptr, nullptr};
      t.guard = std::make_unique<local_node_guard>(t.home->path() / "state" / "ferry" / "local");
      t.pool_guard = std::make_unique<local_node_guard>(t.home->path() / "state" / "ferry" / "pool" / "local");
      make_project(t);
      tenants_.push_back(std::move(t));
    }
    moto_->make_bucket("team");
  }

  void TearDown() override {
    for (auto& t : tenants_) {
      t.guard->cleanup();
      t.pool_guard->cleanup();
    }
  }

  // The same environment for every tenant (a venv with a package), and a workspace of its own.
  void make_project(const tenant& t) {
    write_file(t.project() / "main.py",
               "import os, sys, time, shared\n"
               "time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0)\n"
               "print('done', shared.VALUE, open('whoami').read().strip())\n");
    write_file(t.project() / "whoami", t.name + "\n");
    write_file(t.project() / ".gitignore", ".venv/\n");
    std::string why;
    const auto site = make_venv(t.project() / ".venv", why);
    ASSERT_FALSE(site.empty()) << why;
    write_file(site / "shared" / "__init__.py", "VALUE = 'shared-env'\n");
    write_file(t.project() / "ferry.toml", "[packaging]\npython = \".venv/bin/python\"\n");
  }

  process_options tenant_env(const tenant& t, const std::map<std::string, std::string>& extra = {}) const {
    auto o = local_ferry_env(*moto_, t.home->path(), "s3://team/p", t.project());
    o.env["FERRY_POOL_NAME"] = "team";
    o.env["FERRY_POOL_TENANT"] = t.name;
    o.env["FERRY_POOL_MAX_NODES"] = "4";
    o.env["FERRY_POOL_MAX_WAIT"] = "5m";
    o.env["FERRY_POOL_POLL"] = "1s";
    for (const auto& [k, v] : extra) o.env[k] = v;
    return o;
  }

  // The pool's records as `ferry pool ls --json` shows them, checked by the invariant checker.
  json::object pool_listing(const tenant& t) const {
    const auto ls = run_ferry({"pool", "ls", "team", "--json"}, tenant_env(t));
    EXPECT_EQ(ls.exit_code, 0) << ls.err;
    return json::parse(ls.out).as_object();
  }

  // Snapshots of the pool's records, read with the aws CLI while `running` holds, each checked by the
  // pool's invariant checker; the violations found, and how many snapshots had a record.
  struct watch_report {
    std::vector<std::string> violations;
    std::size_t snapshots = 0;
  };
  watch_report watch_records(const std::atomic<bool>& running) const {
    watch_report out;
    for (int round = 0; running; ++round) {
      const auto dir = tenants_[0].home->path() / fmt::format("records-{}", round);
      const auto copied = moto_->aws({"s3", "cp", "--recursive", "--quiet", "s3://team/p/pools/team/nodes/", dir.string()});
      if (copied.exit_code != 0 || !fs::exists(dir)) continue;
      std::vector<agent::pool::pool_record> records;
      for (const auto& e : fs::directory_iterator(dir)) {
        diagnostics diag;
        auto r = agent::pool::parse_record(read_file(e.path()), e.path().stem().string(), diag);
        if (!r) out.violations.push_back(e.path().filename().string() + ": " + diag.message);
        else records.push_back(std::move(*r));
      }
      if (records.empty()) continue;
      ++out.snapshots;
      const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
      for (auto& v : agent::pool::check_pool(records, now)) out.violations.push_back(std::move(v));
    }
    return out;
  }

  std::vector<tenant> tenants_;
};

// 3 tenants, 12 jobs at once, 4 nodes at most: every job completes, no node is ever leased twice at once,
// the pool never grows past 4, and every lease is given back.
TEST_F(pool_run, three_tenants_run_twelve_jobs_at_once_on_a_pool_of_four_nodes) {
  std::vector<std::pair<const tenant*, std::unique_ptr<child>>> jobs;
  std::vector<fs::path> traces;
  for (int i = 0; i < 12; ++i) {
    const auto& t = tenants_[i % 3];
    traces.push_back(t.home->path() / fmt::format("job{}.jsonl", i));
    jobs.emplace_back(&t, spawn_ferry({"--trace", traces.back().string(), "run", "--", "python3", "main.py", "1"},
                                      tenant_env(t)));
  }
  // The invariant checker over the records in storage, as often as it can read them while the jobs run.
  std::atomic<bool> running{true};
  watch_report watched;
  std::thread watcher([&] { watched = watch_records(running); });
  std::vector<traced_lease> all;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto r = jobs[i].second->wait();
    EXPECT_EQ(r.exit_code, 0) << "job " << i << ": " << r.out << r.err;
    EXPECT_EQ(r.out, fmt::format("done shared-env {}\n", jobs[i].first->name)) << r.err;
    auto leases = leases_in(traces[i]);
    EXPECT_EQ(leases.size(), 1u) << traces[i];
    if (leases.size() != 1) continue;  // (no ASSERT: the watcher must be joined)
    EXPECT_EQ(leases[0].tenant, jobs[i].first->name);
    EXPECT_GE(leases[0].given_back, leases[0].taken) << "job " << i << " did not give its lease back";
    all.push_back(leases[0]);
  }
  running = false;
  watcher.join();
  EXPECT_GE(watched.snapshots, 1u) << "the records were never read while the jobs ran";
  EXPECT_TRUE(watched.violations.empty()) << fmt::format("{}", fmt::join(watched.violations, "\n"));
  // One slot per node: two leases of one node never overlap in time.
  std::map<std::string, std::vector<traced_lease>> by_node;
  std::size_t joined = 0;
  for (const auto& l : all) {
    by_node[l.node].push_back(l);
    joined += l.joined;
  }
  EXPECT_LE(by_node.size(), 4u);
  EXPECT_LE(joined, 4u);
  EXPECT_GE(joined, 1u);
  for (auto& [node, leases] : by_node) {
    std::sort(leases.begin(), leases.end(), [](const auto& a, const auto& b) { return a.taken < b.taken; });
    for (std::size_t i = 1; i < leases.size(); ++i)
      EXPECT_LE(leases[i - 1].given_back, leases[i].taken)
          << node << ": lease " << leases[i].id << " was taken while " << leases[i - 1].id << " was held";
  }
  // The records at the end: at most 4 nodes, sound, every lease given back.
  const auto listing = pool_listing(tenants_[0]);
  const auto& nodes = listing.at("nodes").as_array();
  EXPECT_LE(nodes.size(), 4u);
  EXPECT_TRUE(listing.at("unreadable").as_array().empty());
  for (const auto& n : nodes) EXPECT_TRUE(n.at("leases").as_array().empty()) << json::serialize(n);
}

// A second tenant's run of the same environment reuses the layers its colleague's run left on the node:
// only its own workspace is downloaded.
TEST_F(pool_run, the_second_tenants_run_of_the_same_environment_downloads_no_shared_layer) {
  const auto first_trace = tenants_[0].home->path() / "first.jsonl";
  const auto first = run_ferry({"--trace", first_trace.string(), "run", "--", "python3", "main.py"},
                               tenant_env(tenants_[0]));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, "done shared-env ann\n");
  const auto second_trace = tenants_[1].home->path() / "second.jsonl";
  const auto second = run_ferry({"--trace", second_trace.string(), "run", "--", "python3", "main.py"},
                                tenant_env(tenants_[1]));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, "done shared-env bob\n");
  const auto a = leases_in(first_trace), b = leases_in(second_trace);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_TRUE(a[0].joined);
  EXPECT_FALSE(b[0].joined) << "the second run made a node of its own";
  EXPECT_EQ(a[0].node, b[0].node);
  // The first fetched the environment and its workspace; the second its workspace alone.
  EXPECT_GE(started(node_lines(first_trace), action_types::node::shard), 2u);
  EXPECT_EQ(started(node_lines(second_trace), action_types::node::shard), 1u);
}

// An agent killed while it holds a lease: its slot is free again once the lease expires, and the next
// job, which waited for it, uses it.
TEST_F(pool_run, a_killed_agents_slot_comes_back_when_its_lease_expires_and_the_next_job_takes_it) {
  const std::map<std::string, std::string> one_node = {{"FERRY_POOL_MAX_NODES", "1"}, {"FERRY_POOL_LEASE_TTL", "10s"}};
  auto victim = spawn_ferry({"run", "--", "python3", "main.py", "600"}, tenant_env(tenants_[0], one_node));
  // Until the victim holds its lease.
  bool held = false;
  for (int i = 0; i < 600 && !held; ++i) {
    std::this_thread::sleep_for(100ms);
    const auto ls = run_ferry({"pool", "ls", "team", "--json"}, tenant_env(tenants_[0]));
    if (ls.exit_code != 0) continue;
    const auto listing = json::parse(ls.out);
    for (const auto& n : listing.at("nodes").as_array()) held = held || !n.at("leases").as_array().empty();
  }
  ASSERT_TRUE(held) << "the victim never held a lease";
  victim->signal(SIGKILL);
  (void)victim->wait();

  const auto trace = tenants_[1].home->path() / "next.jsonl";
  const auto next = run_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py"},
                              tenant_env(tenants_[1], one_node));
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(next.out, "done shared-env bob\n");
  const auto leases = leases_in(trace);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].node, "node-000");
  EXPECT_FALSE(leases[0].joined);
  EXPECT_GE(leases[0].waits, 1) << "the pool was not full when the next job came";
  const auto listing = pool_listing(tenants_[1]);
  ASSERT_EQ(listing.at("nodes").as_array().size(), 1u);
  EXPECT_TRUE(listing.at("nodes").as_array()[0].at("leases").as_array().empty());
}

// `pool up` starts the minimum, which later jobs use without making a node; `pool down` ends the nodes of
// the tenant that made them, and says which it cannot end.
TEST_F(pool_run, pool_up_starts_the_minimum_and_pool_down_ends_what_this_tenant_made) {
  const std::map<std::string, std::string> two = {{"FERRY_POOL_MIN_NODES", "2"}};
  const auto up = run_ferry({"pool", "up"}, tenant_env(tenants_[0], two));
  ASSERT_EQ(up.exit_code, 0) << up.err;
  EXPECT_EQ(up.out, "pool team: 2 nodes (2 made now; pool.min_nodes 2)\n");
  const auto again = run_ferry({"pool", "up"}, tenant_env(tenants_[0], two));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "pool team: 2 nodes (0 made now; pool.min_nodes 2)\n");
  auto listing = pool_listing(tenants_[0]);
  ASSERT_EQ(listing.at("nodes").as_array().size(), 2u);

  const auto trace = tenants_[1].home->path() / "run.jsonl";
  const auto ran = run_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py"}, tenant_env(tenants_[1], two));
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const auto leases = leases_in(trace);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_FALSE(leases[0].joined) << "the run made a node while the minimum was idle";

  // Not bob's nodes: he cannot end them, and says so.
  const auto not_his = run_ferry({"pool", "down"}, tenant_env(tenants_[1]));
  EXPECT_EQ(not_his.exit_code, 1) << not_his.out << not_his.err;
  EXPECT_TRUE(contains(not_his.err, "made by ann: not this agent's to end")) << not_his.err;
  EXPECT_EQ(pool_listing(tenants_[1]).at("nodes").as_array().size(), 2u);

  const auto down = run_ferry({"pool", "down"}, tenant_env(tenants_[0]));
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(down.out, "pool team: 2 nodes ended, the pool and its key removed\n");
  EXPECT_TRUE(pool_listing(tenants_[0]).at("nodes").as_array().empty());
  const auto key = moto_->aws({"s3api", "head-object", "--bucket", "team", "--key", "p/pools/team/ssh-key"});
  EXPECT_NE(key.exit_code, 0) << "the pool's key is still there";
}

// A node beyond the minimum that stays idle stops itself; the next job finds it gone, removes its record
// and grows the pool again under the freed name.
TEST_F(pool_run, a_node_that_stopped_itself_when_idle_is_removed_from_the_pool_by_the_next_job) {
  const std::map<std::string, std::string> quick = {{"FERRY_POOL_IDLE_TIMEOUT", "2s"},
                                                    {"FERRY_NODES_WATCHDOG_INTERVAL", "1s"}};
  const auto first_trace = tenants_[0].home->path() / "first.jsonl";
  const auto first = run_ferry({"--trace", first_trace.string(), "run", "--", "python3", "main.py"},
                               tenant_env(tenants_[0], quick));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto made = leases_in(first_trace);
  ASSERT_EQ(made.size(), 1u);
  // Until its sshd is gone: nothing answers at its address any more.
  const auto listing = pool_listing(tenants_[0]);
  ASSERT_EQ(listing.at("nodes").as_array().size(), 1u);
  const auto address = std::string(listing.at("nodes").as_array()[0].at("address").as_string());
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    std::this_thread::sleep_for(100ms);
    gone = run({"bash", "-c", "exec 3<>/dev/tcp/" + address + "/22"}).exit_code != 0;
  }
  ASSERT_TRUE(gone) << "the idle node never stopped itself";

  const auto trace = tenants_[1].home->path() / "next.jsonl";
  const auto next = run_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py"}, tenant_env(tenants_[1]));
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(next.out, "done shared-env bob\n");
  const auto lines = trace_file_lines(trace);
  std::size_t left = 0;
  for (const auto& o : lines)
    if (trace_type(o) == action_types::pool::node_left && trace_text(o, "node") == made[0].node) ++left;
  EXPECT_EQ(left, 1u);
  // The first lease was of the gone node; the second of the node made in its place, under its name.
  const auto leases = leases_in(trace);
  ASSERT_EQ(leases.size(), 2u);
  EXPECT_EQ(leases[0].node, made[0].node);
  EXPECT_FALSE(leases[0].joined);
  EXPECT_TRUE(leases[1].joined);
  EXPECT_EQ(leases[1].node, made[0].node) << "the freed name is the lowest";
  EXPECT_EQ(pool_listing(tenants_[1]).at("nodes").as_array().size(), 1u);
}

}  // namespace
}  // namespace ferry::test::pool_run_tests
