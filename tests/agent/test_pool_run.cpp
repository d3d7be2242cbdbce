// `ferry run` on a team's pool (pool.name) end to end: tenants that share nothing but storage (each its
// own HOME, so its own config, key, state and cache) lease the slots of local nodes (sshd in network
// namespaces) from records in moto_server, which answers one request at a time (moto checks If-Match
// and stores without a lock; S3 does both at once). On a node, each tenant's commands run as a Unix user of
// its own (ferry-ann, ferry-bob, ferry-cat), made on first use in the machine's /etc/passwd, which local
// nodes share: the fixture removes them before and after each test.
#include "agent/pool/pool_invariants.hpp"
#include "agent/pool/pool_record.hpp"
#include "tracing/action_types.hpp"

#include "pool_tenants.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <atomic>
#include <csignal>
#include <map>
#include <memory>
#include <set>
#include <sstream>
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

// Whether the trace so far (complete lines only: the agent may be writing the last) has an action of
// `type` started.
bool has_started(const fs::path& trace, std::string_view type) {
  std::ifstream in(trace);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.erase(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const auto o = json::parse(line).as_object();
    if (trace_type(o) == type && trace_text(o, "action_status") == "started") return true;
  }
  return false;
}

std::size_t started(const std::vector<json::object>& lines, std::string_view type) {
  std::size_t n = 0;
  for (const auto& o : lines)
    if (trace_type(o) == type && trace_text(o, "action_status") == "started") ++n;
  return n;
}

class pool_run : public pool_tenants {
 protected:
  // The same environment for every tenant (a venv with a package), and a workspace of its own.
  void make_project(const tenant& t) override {
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
    auto o = pool_env(t);
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
  // Until the victim holds its lease and its command runs on the node.
  bool held = false;
  for (int i = 0; i < 600 && !(held && !processes_naming("main.py 600").empty()); ++i) {
    std::this_thread::sleep_for(100ms);
    const auto ls = run_ferry({"pool", "ls", "team", "--json"}, tenant_env(tenants_[0]));
    if (ls.exit_code != 0) continue;
    const auto listing = json::parse(ls.out);
    for (const auto& n : listing.at("nodes").as_array()) held = held || !n.at("leases").as_array().empty();
  }
  ASSERT_TRUE(held) << "the victim never held a lease";
  ASSERT_FALSE(processes_naming("main.py 600").empty()) << "the victim's command never ran";
  victim->signal(SIGKILL);
  (void)victim->wait();
  // Its command goes on running on the node until its lease expires; then the node program ends it.
  bool ended = false;
  for (int i = 0; i < 1200 && !ended; ++i) {
    std::this_thread::sleep_for(100ms);
    ended = processes_naming("main.py 600").empty();
  }
  EXPECT_TRUE(ended) << "the killed agent's command outlived its lease: " << fmt::format("{}", fmt::join(processes_naming("main.py 600"), "; "));

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
  // The team's settings: bob knows the node had been idle past the timeout, so it stopped itself (his
  // provider cannot ask ann's).
  const auto next = run_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py"},
                              tenant_env(tenants_[1], quick));
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

// A map on a pool: its nodes are leases, more of them as its tasks wait, each on a node of its own, all
// given back at the end.
TEST_F(pool_run, a_map_leases_its_nodes_from_the_pool_and_gives_them_back) {
  const auto trace = tenants_[0].home->path() / "map.jsonl";
  const auto mapped = run_ferry({"--trace", trace.string(), "map", "--nodes", "2", "--range", "1..6", "--concurrency",
                                 "1", "--", "python3", "main.py", "0.5"},
                                tenant_env(tenants_[0], {{"FERRY_POOL_MAX_NODES", "3"}}));
  ASSERT_EQ(mapped.exit_code, 0) << mapped.err;
  EXPECT_EQ(std::count(mapped.out.begin(), mapped.out.end(), '\n'), 6) << mapped.out;
  const auto leases = leases_in(trace);
  ASSERT_GE(leases.size(), 2u);
  std::set<std::string> nodes;
  for (const auto& l : leases) {
    EXPECT_TRUE(nodes.insert(l.node).second) << "two of the map's leases on " << l.node;
    EXPECT_GE(l.given_back, l.taken) << l.node;
  }
  const auto listing = pool_listing(tenants_[0]);
  EXPECT_LE(listing.at("nodes").as_array().size(), 3u);
  for (const auto& n : listing.at("nodes").as_array()) EXPECT_TRUE(n.at("leases").as_array().empty());
}

// Ctrl-C of a job on a pool: the command on the shared node ends, the lease is given back, and the
// agent exits as interrupted.
TEST_F(pool_run, ctrl_c_stops_the_command_on_the_pool_node_and_gives_the_lease_back) {
  const auto trace = tenants_[0].home->path() / "interrupted.jsonl";
  auto job = spawn_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py", "600"}, tenant_env(tenants_[0]));
  bool running = false;
  for (int i = 0; i < 600 && !running; ++i) {
    std::this_thread::sleep_for(100ms);
    running = has_started(trace, action_types::agent::task) && !processes_naming("main.py 600").empty();
  }
  if (!running) {
    job->signal(SIGKILL);
    FAIL() << "the command never started: " << job->wait().err;
  }
  job->signal(SIGINT);
  const auto r = job->wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  const auto leases = leases_in(trace);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_GE(leases[0].given_back, leases[0].taken) << "the lease was not given back";
  const auto listing = pool_listing(tenants_[0]);
  ASSERT_EQ(listing.at("nodes").as_array().size(), 1u);
  EXPECT_TRUE(listing.at("nodes").as_array()[0].at("leases").as_array().empty()) << json::serialize(listing);
  EXPECT_EQ(processes_naming("main.py 600"), std::vector<std::string>{});
}

// A node that does not answer one tenant while another holds a live lease on it stays in the pool: its
// silence may be this agent's network, not the node. The job leases elsewhere, and gives back what it took.
TEST_F(pool_run, a_silent_node_that_another_tenant_holds_stays_in_the_pool) {
  // A record of ann's, on an address where nothing listens, with a live lease of hers.
  const auto key_dir = tenants_[0].home->path() / "hostkey";
  fs::create_directories(key_dir);
  ASSERT_EQ(run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", (key_dir / "k").string()}).exit_code, 0);
  const auto pub = read_file(key_dir / "k.pub");
  const auto host_key = pub.substr(0, pub.find(' ', pub.find(' ') + 1));
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  agent::pool::pool_record r;
  r.node_id = "node-000";
  r.provider = "local";
  r.provider_id = "local-silent";
  r.address = "10.200.255.254";
  r.user = "root";
  r.host_key = host_key;
  r.capacity = 2;
  r.created_at = now - 60;
  r.created_by = "ann";
  r.leases.push_back({"ann-lease", "ann", 1, "elsewhere:1:abc", now + 3600});
  const auto file = key_dir / "node-000.json";
  write_file(file, agent::pool::serialise_record(r));
  ASSERT_EQ(moto_->aws({"s3", "cp", "--quiet", file.string(), "s3://team/p/pools/team/nodes/node-000.json"}).exit_code, 0);

  const auto trace = tenants_[1].home->path() / "bob.jsonl";
  const auto ran = run_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py"},
                             tenant_env(tenants_[1], {{"FERRY_POOL_NODE_SLOTS", "2"}, {"FERRY_SSH_CONNECT_TIMEOUT", "2s"}}));
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "done shared-env bob\n");
  std::size_t kept = 0;
  for (const auto& o : trace_file_lines(trace))
    if (trace_type(o) == action_types::pool::node_kept && trace_text(o, "node") == "node-000") ++kept;
  EXPECT_EQ(kept, 1u);
  const auto leases = leases_in(trace);
  ASSERT_EQ(leases.size(), 2u);
  EXPECT_EQ(leases[0].node, "node-000");
  EXPECT_GE(leases[0].given_back, leases[0].taken) << "the lease on the silent node was kept";
  EXPECT_EQ(leases[1].node, "node-001");
  const auto listing = pool_listing(tenants_[1]);
  const auto& nodes = listing.at("nodes").as_array();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].at("node").as_string(), "node-000");
  ASSERT_EQ(nodes[0].at("leases").as_array().size(), 1u);
  EXPECT_EQ(nodes[0].at("leases").as_array()[0].at("tenant").as_string(), "ann");
}

// Two tenants on one node at once (one node of two slots): each command runs as its tenant's own user, and
// the second cannot read the first's workspace, see its process, or read its environment.
TEST_F(pool_run, two_tenants_on_one_node_run_as_their_own_users_and_cannot_reach_each_others_work) {
  const std::map<std::string, std::string> one_node = {{"FERRY_POOL_MAX_NODES", "1"}, {"FERRY_POOL_NODE_SLOTS", "2"}};
  // Where the first command says where it is and waits to be let go: a directory every user may write.
  temp_dir meet;
  fs::permissions(meet.path(), fs::perms::all);
  const auto info = meet.path() / "ann.info";
  const auto ann_trace = tenants_[0].home->path() / "ann.jsonl";
  auto ann = spawn_ferry({"--trace", ann_trace.string(), "run", "--env", "SECRET=ann-secret-value", "--", "sh", "-c",
                          "echo \"$(id -un) $(pwd) $$\" > \"$1/ann.tmp\" && mv \"$1/ann.tmp\" \"$1/ann.info\"; i=0; "
                          "while [ ! -e \"$1/done\" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; id -un",
                          "sh", meet.path().string()},
                         tenant_env(tenants_[0], one_node));
  for (int i = 0; i < 1200 && !fs::exists(info); ++i) std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(fs::exists(info)) << "ann's command never ran";
  std::istringstream said(read_file(info));
  std::string ann_user, ann_dir, ann_pid;
  said >> ann_user >> ann_dir >> ann_pid;
  EXPECT_EQ(ann_user, "ferry-ann");
  EXPECT_TRUE(contains(ann_dir, "/tenants/ferry-ann/")) << ann_dir;

  const auto bob_trace = tenants_[1].home->path() / "bob.jsonl";
  const auto bob = run_ferry(
      {"--trace", bob_trace.string(), "run", "--", "sh", "-c",
       "id -un; cat \"$1/whoami\" 2>&1; if [ -e /proc/$2 ]; then echo \"sees $2\"; else echo \"hides $2\"; fi; "
       "cat /proc/$2/environ 2>&1 | tr '\\000\\n' '  '; echo; ls /proc | grep -qx \"$2\" && echo listed || echo unlisted",
       "sh", ann_dir, ann_pid},
      tenant_env(tenants_[1], one_node));
  write_file(meet.path() / "done", "");
  const auto ann_end = ann->wait();
  EXPECT_EQ(ann_end.exit_code, 0) << ann_end.err;
  EXPECT_EQ(ann_end.out, "ferry-ann\n");
  ASSERT_EQ(bob.exit_code, 0) << bob.err;
  std::istringstream lines(bob.out);
  std::string who, read, proc, environ, listed;
  std::getline(lines, who);
  std::getline(lines, read);
  std::getline(lines, proc);
  std::getline(lines, environ);
  std::getline(lines, listed);
  EXPECT_EQ(who, "ferry-bob");
  EXPECT_TRUE(contains(read, "Permission denied")) << "bob read ann's workspace: " << read;
  EXPECT_EQ(proc, "hides " + ann_pid);
  EXPECT_FALSE(contains(bob.out, "ann-secret-value")) << bob.out;
  EXPECT_TRUE(contains(environ, "No such file or directory")) << environ;
  EXPECT_EQ(listed, "unlisted");
  // Both on the one node, at once.
  const auto a = leases_in(ann_trace), b = leases_in(bob_trace);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].node, b[0].node);
  EXPECT_LT(b[0].taken, a[0].given_back);
}

// Data a tenant stages lands as its own (the node program stages as its user): the other tenant on the
// node cannot read it, nor stage where the first may not let it write.
TEST_F(pool_run, a_tenants_staged_data_is_its_own) {
  const std::map<std::string, std::string> one_node = {{"FERRY_POOL_MAX_NODES", "1"}};
  write_file(tenants_[0].home->path() / "data" / "secret.txt", "ann's data\n");
  const auto put = moto_->aws({"s3", "cp", "--recursive", "--quiet", (tenants_[0].home->path() / "data").string(),
                               "s3://team/data"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  temp_dir meet;
  fs::permissions(meet.path(), fs::perms::all);
  const auto staged = meet.path() / "ann-data";
  const auto ann = run_ferry({"run", "--stage", "s3://team/data=" + staged.string(), "--", "sh", "-c",
                              "cat \"$1/secret.txt\"; stat -c '%U %a' \"$1\" \"$1/secret.txt\"", "sh", staged.string()},
                             tenant_env(tenants_[0], one_node));
  ASSERT_EQ(ann.exit_code, 0) << ann.err;
  EXPECT_EQ(ann.out, "ann's data\nferry-ann 700\nferry-ann 600\n");
  const auto bob = run_ferry({"run", "--", "sh", "-c", "cat \"$1/secret.txt\" 2>&1 || true", "sh", staged.string()},
                             tenant_env(tenants_[1], one_node));
  ASSERT_EQ(bob.exit_code, 0) << bob.err;
  EXPECT_TRUE(contains(bob.out, "Permission denied")) << bob.out;
  // Nor may bob's staging write into ann's directory: it runs as bob.
  const auto into = run_ferry({"run", "--stage", "s3://team/data=" + (staged / "more").string(), "--", "true"},
                              tenant_env(tenants_[1], one_node));
  EXPECT_NE(into.exit_code, 0) << into.out;
  EXPECT_TRUE(contains(into.err, "Permission denied")) << into.err;
}

// A tenant's user is made on its first run on the machine (its home the tenant's alone), and the fixture
// leaves none behind: local nodes share the workstation's /etc/passwd.
TEST_F(pool_run, a_tenants_user_is_made_on_first_use_and_none_is_left_on_the_machine) {
  for (const auto& t : tenants_) ASSERT_EQ(passwd_line(user_of(t)), "") << "left by an earlier run";
  const auto ran = run_ferry({"run", "--", "sh", "-c", "id -un; echo $HOME"}, tenant_env(tenants_[0]));
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "ferry-ann\n/home/ferry-ann\n");
  const auto line = passwd_line("ferry-ann");
  EXPECT_TRUE(contains(line, ":ferry tenant:/home/ferry-ann:")) << line;
  struct stat st {};
  ASSERT_EQ(::stat("/home/ferry-ann", &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  end_nodes_and_users();
  for (const auto& t : tenants_) EXPECT_EQ(passwd_line(user_of(t)), "") << user_of(t) << " is left on the machine";
  EXPECT_FALSE(fs::exists("/home/ferry-ann"));
}

}  // namespace
}  // namespace ferry::test::pool_run_tests
