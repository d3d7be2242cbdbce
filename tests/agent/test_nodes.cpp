// `ferry nodes up|ls|down` and `ferry exec` end to end through the ferry binary: local nodes (real sshd
// in network namespaces), and ec2 nodes from moto_server that a harness brings up as real sshd at each
// instance's private address, so that ferry's readiness polling has something true to find.
#include "provision/local/machine.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/sshd.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include "support/local_nodes.hpp"
#include "ec2_harness.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// PID 1 here does not reap orphans: a killed process may linger as a zombie, which counts as gone.
bool process_gone(int pid) { return dead_or_zombie(pid); }

// The pid a remote command wrote to `file` (`echo $! > file`), once it is there whole; 0 after 10 s without.
int remote_pid(const fs::path& file) {
  for (int i = 0; i < 200; ++i) {
    const auto text = read_file(file);
    if (!text.empty() && text.back() == '\n') return std::stoi(text);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

// Local nodes without storage: `ferry nodes` needs none, and a test that runs something makes its own.
class nodes_cli : public local_nodes {
 protected:
  json::array registry() const {
    const auto text = read_file(home_ / "state" / "ferry" / "nodes.json");
    if (text.empty()) return {};
    const auto doc = json::parse(text);
    return doc.is_array() ? doc.as_array() : doc.at("nodes").as_array();
  }
};

TEST_F(nodes_cli, local_nodes_up_exec_ls_and_down) {
  auto o = env();
  const auto up = run_ferry({"nodes", "up", "2"}, o);
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  const auto nodes = registry();
  ASSERT_EQ(nodes.size(), 2u);
  std::set<std::string> names;
  for (const auto& n : nodes) {
    EXPECT_EQ(n.at("state").as_string(), "running");
    EXPECT_EQ(std::string(n.at("host").as_string()).rfind("10.200.", 0), 0u) << n;
    names.insert(std::string(n.at("name").as_string()));
  }

  const auto ls = run_ferry({"nodes", "ls"}, o);
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  for (const auto& n : nodes) EXPECT_NE(ls.out.find(std::string(n.at("id").as_string())), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("running"), std::string::npos) << ls.out;

  // Every node answers, each line prefixed with its name.
  const auto hello = run_ferry({"exec", "--", "sh", "-c", "echo hello; echo oops >&2"}, o);
  EXPECT_EQ(hello.exit_code, 0) << hello.err;
  for (const auto& name : names) {
    EXPECT_NE(hello.out.find(name + " | hello\n"), std::string::npos) << hello.out;
    EXPECT_NE(hello.err.find(name + " | oops\n"), std::string::npos) << hello.err;
  }

  // One node: raw output, byte-exact arguments, its exit code.
  const std::string first(nodes[0].at("id").as_string());
  const std::vector<std::string> tricky{"a b", "it's", "\"q\"", "$(id)", "*", "back\\slash", "new\nline", ""};
  std::vector<std::string> argv{"exec", "--nodes", first, "--", "printf", "[%s]"};
  argv.insert(argv.end(), tricky.begin(), tricky.end());
  const auto echoed = run_ferry(argv, o);
  EXPECT_EQ(echoed.exit_code, 0) << echoed.err;
  std::string expected;
  for (const auto& a : tricky) expected += "[" + a + "]";
  EXPECT_EQ(echoed.out, expected);
  EXPECT_EQ(run_ferry({"exec", "--nodes", first, "--", "sh", "-c", "exit 42"}, o).exit_code, 42);
  EXPECT_EQ(run_ferry({"exec", "--nodes", first, "--", "sh", "-c", "kill -TERM $$"}, o).exit_code, 128 + SIGTERM);

  const auto unknown = run_ferry({"exec", "--nodes", "no-such-node", "--", "true"}, o);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no-such-node"), std::string::npos) << unknown.err;

  const auto trace = home_ / "down.jsonl";
  const auto down = run_ferry({"--trace", trace.string(), "nodes", "down", "--all"}, o);
  EXPECT_EQ(down.exit_code, 0) << down.err;
  EXPECT_TRUE(registry().empty());
  for (const auto& n : nodes) {
    const auto netns = "ferry-" + std::string(n.at("id").as_string());
    EXPECT_FALSE(fs::exists("/run/netns/" + netns)) << netns;
  }
  // Each end is the action `ferry trace stats` ends a node's provisioned time with, naming the node.
  std::set<std::string> ended;
  std::ifstream in(trace);
  for (std::string line; std::getline(in, line);) {
    const auto m = json::parse(line).as_object();
    const auto* type = m.if_contains("action_type");
    if (type && type->as_string() == action_types::provision::terminate &&
        m.at("action_status").as_string() == "started")
      ended.insert(std::string(m.at("node").as_string()));
  }
  std::set<std::string> ids;
  for (const auto& n : nodes) ids.insert(std::string(n.at("id").as_string()));
  EXPECT_EQ(ended, ids) << read_file(trace);
}

fs::path registry_path(const temp_dir& home) { return home / "state" / "ferry" / "nodes.json"; }

// Local nodes whose records exist under this test's state dir, whatever the registry says.
std::size_t local_machines(const temp_dir& home) {
  const auto dir = home / "state" / "ferry" / "local";
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) n += e.is_directory() ? 1 : 0;
  return n;
}

TEST_F(nodes_cli, a_damaged_registry_is_set_aside_and_no_node_goes_unrecorded) {
  auto o = env();
  fs::create_directories(registry_path(home_).parent_path());
  std::ofstream(registry_path(home_)) << "{\"version\": 1, \"nodes\": [tru";
  const auto up = run_ferry({"nodes", "up", "1"}, o);
  ASSERT_EQ(up.exit_code, 0) << up.err;
  EXPECT_NE(up.err.find("is damaged"), std::string::npos) << up.err;
  EXPECT_NE(up.err.find("moved it to"), std::string::npos) << up.err;
  std::size_t aside = 0;
  for (const auto& e : fs::directory_iterator(registry_path(home_).parent_path())) {
    if (e.path().filename().string().starts_with("nodes.json.damaged-")) {
      ++aside;
      EXPECT_EQ(read_file(e.path()), "{\"version\": 1, \"nodes\": [tru");
    }
  }
  EXPECT_EQ(aside, 1u);
  ASSERT_EQ(registry().size(), 1u);
  const auto down = run_ferry({"nodes", "down", "--all"}, o);
  EXPECT_EQ(down.exit_code, 0) << down.err;
  EXPECT_TRUE(registry().empty());
  EXPECT_EQ(local_machines(home_), 0u);
}

TEST_F(nodes_cli, a_registry_that_cannot_be_read_starts_no_node) {
  auto o = env();
  fs::create_directories(registry_path(home_));  // a directory where the file should be
  const auto up = run_ferry({"nodes", "up", "1"}, o);
  EXPECT_NE(up.exit_code, 0);
  EXPECT_NE(up.err.find(registry_path(home_).string()), std::string::npos) << up.err;
  EXPECT_EQ(local_machines(home_), 0u);
  const auto run = run_ferry({"run", "--nodes", "1", "--", "true"}, o);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_EQ(local_machines(home_), 0u);
}

TEST_F(nodes_cli, a_node_the_registry_lost_is_listed_by_its_provider_and_ended) {
  auto o = env();
  ASSERT_EQ(run_ferry({"nodes", "up", "1"}, o).exit_code, 0);
  const std::string id(registry().at(0).at("id").as_string());
  std::ofstream(registry_path(home_)) << "{\"version\":1,\"nodes\":[]}\n";
  const auto ls = run_ferry({"nodes", "ls"}, o);
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find(id), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("unrecorded"), std::string::npos) << ls.out;
  const auto down = run_ferry({"nodes", "down", "--all"}, o);
  EXPECT_EQ(down.exit_code, 0) << down.err;
  EXPECT_NE(down.out.find("ended " + id), std::string::npos) << down.out;
  EXPECT_EQ(local_machines(home_), 0u);
  EXPECT_FALSE(fs::exists("/run/netns/ferry-" + id));
}

TEST_F(nodes_cli, a_warm_node_with_another_host_key_is_refused_and_neither_ended_nor_replaced) {
  auto o = env();
  ASSERT_EQ(run_ferry({"nodes", "up", "1"}, o).exit_code, 0);
  const std::string id(registry().at(0).at("id").as_string());
  // ferry's record of the node's key now names another key, as if the node had been swapped.
  const auto key = home_ / "other_key";
  ASSERT_EQ(run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key.string()}).exit_code, 0);
  const auto other = read_file(fs::path(key.string() + ".pub"));
  const auto known = home_ / "config" / "ferry" / "known_hosts";
  std::istringstream lines(read_file(known));
  std::string rewritten, line;
  while (std::getline(lines, line)) {
    if (line.starts_with(id + " ")) line = id + " " + other.substr(0, other.rfind(' '));
    rewritten += line + "\n";
  }
  std::ofstream(known) << rewritten;
  // A run needs storage: moto on the bridge the node made, where nodes reach it.
  moto_server moto(moto_options{.host = "10.200.0.1"});
  moto.make_bucket("ferry-run");
  for (const auto& [k, v] : moto.process_env().env) o.env[k] = v;
  for (const auto& k : moto.process_env().unset_env) o.unset_env.push_back(k);
  o.env["FERRY_STORAGE_URL"] = "s3://ferry-run/p";
  o.env["FERRY_PACKAGING_SHIP_SITE_PACKAGES"] = "false";
  temp_dir project;
  project.write("main.py", "print('hi')\n");
  o.cwd = project.path();
  const auto ran = run_ferry({"run", "--nodes", "1", "--", "true"}, o);
  EXPECT_NE(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find(id), std::string::npos) << ran.err;
  EXPECT_NE(ran.err.find("host key"), std::string::npos) << ran.err;
  const auto nodes = registry();
  ASSERT_EQ(nodes.size(), 1u) << "the node was replaced";
  EXPECT_EQ(nodes.at(0).at("id").as_string(), id);
  EXPECT_EQ(local_machines(home_), 1u);
}

TEST_F(nodes_cli, ctrl_c_on_exec_kills_the_remote_process_and_exits_130) {
  auto o = env();
  ASSERT_EQ(run_ferry({"nodes", "up", "1"}, o).exit_code, 0);
  const auto pid_file = home_ / "remote.pid";
  auto child = spawn_ferry({"exec", "--", "sh", "-c", fmt::format("sleep 60 & echo $! > {}; wait", pid_file.string())}, o);
  const int pid = remote_pid(pid_file);
  ASSERT_GT(pid, 0) << "the remote command never started";
  EXPECT_FALSE(process_gone(pid));
  child->signal(SIGINT);
  const auto r = child->wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = process_gone(pid);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone) << "the remote sleep (pid " << pid << ") outlived ferry exec";
  EXPECT_EQ(run_ferry({"nodes", "down", "--all"}, o).exit_code, 0);
}

// ---- nodes that stop themselves when idle ----

class idle_nodes : public nodes_cli {
 protected:
  process_options idle_env() const {
    auto o = env();
    o.env["FERRY_NODES_IDLE_TIMEOUT"] = "3s";
    o.env["FERRY_NODES_WATCHDOG_INTERVAL"] = "500ms";
    return o;
  }

  // The STATE column of `ferry nodes ls` for node `id`; "" when it is not listed.
  static std::string listed_state(const std::string& ls, const std::string& id) {
    std::istringstream lines(ls);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      std::string first, name, provider, address, state;
      if (words >> first >> name >> provider >> address >> state && first == id) return state;
    }
    return "";
  }

  // Polls `ferry nodes ls` until node `id` is listed as `state`, within a bound that only a broken
  // watchdog reaches. Returns the last listing.
  std::string wait_for_state(const process_options& o, const std::string& id, const std::string& state) const {
    std::string last;
    for (int i = 0; i < 240; ++i) {
      const auto ls = run_ferry({"nodes", "ls"}, o);
      last = ls.out + ls.err;
      if (listed_state(ls.out, id) == state) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return last;
  }

  static std::string text(const json::value& v, std::string_view key) {
    return std::string(v.at(key).as_string());
  }
  static bool flag(const json::value& n, std::string_view key) {
    const auto* v = n.at("details").as_object().if_contains(key);
    return v && !(v->is_bool() && !v->as_bool());
  }
  // The node's state dir for ferry's markers and watchdog, as seen from the host.
  static fs::path node_state_dir(const json::value& n) {
    return fs::path(text(n.at("details"), "dir")) / "home" / ".local" / "state" / "ferry";
  }
};

TEST_F(idle_nodes, an_idle_local_node_stops_itself_and_down_still_cleans_it_up) {
  const auto o = idle_env();
  const auto up = run_ferry({"nodes", "up", "1"}, o);
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  const auto nodes = registry();
  ASSERT_EQ(nodes.size(), 1u);
  const auto& n = nodes[0];
  const auto id = text(n, "id"), name = text(n, "name");
  EXPECT_TRUE(flag(n, "watchdog")) << n;
  EXPECT_FALSE(flag(n, "pinned")) << n;
  EXPECT_NE(up.out.find(name + " (" + id + ") stops itself after 3s idle"), std::string::npos) << up.out;

  const auto ls = wait_for_state(o, id, "stopped");
  ASSERT_EQ(listed_state(ls, id), "stopped") << ls << read_file(node_state_dir(n) / "watchdog.log");
  const auto log = read_file(node_state_dir(n) / "watchdog.log");
  EXPECT_NE(log.find("stopping the node"), std::string::npos) << log;

  // Commands on it fail at once, naming it and saying why.
  const auto refused = run_ferry({"exec", "--", "true"}, o);
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(refused.err.find(id), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("node " + name + " (" + id + ") is stopped: stopped itself: idle for"),
            std::string::npos)
      << refused.err;

  const auto down = run_ferry({"nodes", "down", "--all"}, o);
  EXPECT_EQ(down.exit_code, 0) << down.err;
  EXPECT_TRUE(registry().empty());
  EXPECT_FALSE(fs::exists("/run/netns/" + text(n.at("details"), "netns")));
  EXPECT_NE(run({"ip", "link", "show", text(n.at("details"), "veth")}).exit_code, 0);
  EXPECT_FALSE(fs::exists(text(n.at("details"), "dir")));
}

TEST_F(idle_nodes, a_node_running_a_long_command_does_not_stop_until_it_ends) {
  const auto o = idle_env();
  ASSERT_EQ(run_ferry({"nodes", "up", "1"}, o).exit_code, 0);
  const auto id = text(registry().at(0), "id");
  // Longer than the idle timeout, several times over: had the node stopped, the sleep would have been
  // killed with it.
  const auto slept = run_ferry({"exec", "--", "sleep", "8"}, o);
  EXPECT_EQ(slept.exit_code, 0) << slept.err;
  const auto ls = wait_for_state(o, id, "stopped");
  EXPECT_EQ(listed_state(ls, id), "stopped") << ls;
  EXPECT_EQ(run_ferry({"nodes", "down", "--all"}, o).exit_code, 0);
}

TEST_F(idle_nodes, the_warm_minimum_stays_up_and_the_rest_stops) {
  auto o = idle_env();
  o.env["FERRY_NODES_MIN_NODES"] = "1";
  const auto up = run_ferry({"nodes", "up", "2"}, o);
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  const auto nodes = registry();
  ASSERT_EQ(nodes.size(), 2u);
  // The first node keeps the minimum; the second is watched.
  EXPECT_TRUE(flag(nodes[0], "pinned")) << nodes[0];
  EXPECT_FALSE(flag(nodes[0], "watchdog")) << nodes[0];
  EXPECT_FALSE(flag(nodes[1], "pinned")) << nodes[1];
  EXPECT_TRUE(flag(nodes[1], "watchdog")) << nodes[1];
  const auto warm = text(nodes[0], "id"), idle = text(nodes[1], "id");
  EXPECT_NE(up.out.find("(" + warm + ") is kept warm (nodes.min_nodes = 1)"), std::string::npos) << up.out;

  const auto ls = wait_for_state(o, idle, "stopped");
  EXPECT_EQ(listed_state(ls, idle), "stopped") << ls;
  EXPECT_EQ(listed_state(ls, warm), "running") << ls;
  EXPECT_FALSE(fs::exists(node_state_dir(nodes[0]) / "watchdog.pid"));
  EXPECT_EQ(run_ferry({"exec", "--nodes", warm, "--", "true"}, o).exit_code, 0);
  EXPECT_EQ(run_ferry({"nodes", "down", "--all"}, o).exit_code, 0);
  EXPECT_TRUE(registry().empty());
}

TEST_F(idle_nodes, a_command_whose_sshd_dies_fails_exec_with_the_node_named_and_is_ended_on_the_node) {
  auto o = idle_env();
  o.env["FERRY_NODES_IDLE_TIMEOUT"] = "600s";  // the node must not stop itself meanwhile
  ASSERT_EQ(run_ferry({"nodes", "up", "1"}, o).exit_code, 0);
  const auto nodes = registry();
  ASSERT_EQ(nodes.size(), 1u);
  ASSERT_TRUE(flag(nodes[0], "watchdog")) << nodes[0];
  const auto id = text(nodes[0], "id");
  const auto pid_file = home_ / "remote.pid";
  auto child = spawn_ferry({"exec", "--", "sh", "-c", fmt::format("sleep 600 & echo $! > {}; wait", pid_file.string())},
                           o);
  const int pid = remote_pid(pid_file);
  ASSERT_GT(pid, 0) << "the remote command never started";
  // Every sshd of the node (its listener, and the session that runs the command) dies at once.
  const auto in_node = run({"ip", "netns", "pids", "ferry-" + id});
  ASSERT_EQ(in_node.exit_code, 0) << in_node.err;
  std::istringstream pids(in_node.out);
  int killed = 0;
  for (int p = 0; pids >> p;) {
    if (read_file(fmt::format("/proc/{}/comm", p)) != "sshd\n") continue;
    ::kill(p, SIGKILL);
    ++killed;
  }
  ASSERT_GE(killed, 2) << in_node.out;
  const auto r = child->wait();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(id), std::string::npos) << r.err;
  // Nobody can reach the command any more: the node's watchdog ends it (TERM, and KILL a tick later).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = process_gone(pid);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone) << "the remote sleep (pid " << pid << ") outlived its SSH session\n"
                    << read_file(node_state_dir(nodes[0]) / "watchdog.log");
  EXPECT_NE(read_file(node_state_dir(nodes[0]) / "watchdog.log").find("lost its SSH session"), std::string::npos);
  EXPECT_EQ(run_ferry({"nodes", "down", "--all"}, o).exit_code, 0);
}

TEST_F(idle_nodes, an_ssh_host_gets_no_watchdog) {
  sshd_server host;
  const auto key_dir = home_ / "config" / "ferry";
  fs::create_directories(key_dir);
  ASSERT_EQ(run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ferry", "-f", (key_dir / "id_ed25519").string()})
                .exit_code, 0);
  host.authorize(read_file(key_dir / "id_ed25519.pub"));
  const auto config = home_ / "ferry.toml";
  std::ofstream(config) << fmt::format("[nodes]\nprovider = \"ssh\"\nssh_hosts = [\"root@{}:{}\"]\n", host.host(),
                                       host.port());
  auto o = idle_env();
  const auto up = run_ferry({"--config", config.string(), "nodes", "up", "1"}, o);
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err << host.log();
  const auto nodes = registry();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_FALSE(flag(nodes[0], "watchdog")) << nodes[0];
  EXPECT_EQ(run_ferry({"--config", config.string(), "exec", "--", "true"}, o).exit_code, 0);
  // Nothing of the watchdog, and no markers, on a host that is not ferry's.
  EXPECT_FALSE(fs::exists(host.home() / ".local" / "state" / "ferry"));
  for (const pid_t pid : host.processes())
    EXPECT_EQ(read_file(fmt::format("/proc/{}/cmdline", pid)).find("watchdog"), std::string::npos);
  EXPECT_EQ(run_ferry({"--config", config.string(), "nodes", "down", "--all"}, o).exit_code, 0);
}

TEST_F(nodes_cli, ec2_nodes_from_moto_come_up_and_readiness_finds_their_sshd) {
  moto_server moto({.auth = true});
  auto o = env();
  for (const auto& [k, v] : moto.process_env().env) o.env[k] = v;
  // ferry's key first, so that the harness can authorize it.
  const auto key_dir = home_ / "config" / "ferry";
  fs::create_directories(key_dir);
  ASSERT_EQ(run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ferry", "-f", (key_dir / "id_ed25519").string()})
                .exit_code, 0);
  const auto public_key = read_file(key_dir / "id_ed25519.pub");

  const auto subnet_id = make_ec2_subnet(moto);
  ASSERT_FALSE(subnet_id.empty());
  use_ec2_provider(o.env, subnet_id);

  // A wrong secret is refused, and nothing starts.
  auto wrong = o;
  wrong.env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret";
  const auto refused = run_ferry({"nodes", "up", "1"}, wrong);
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("secret"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find("not-the-secret"), std::string::npos) << refused.err;
  const auto none = moto.aws({"ec2", "describe-instances", "--query", "Reservations[].Instances[].InstanceId",
                              "--output", "text"});
  EXPECT_EQ(none.out.find("i-"), std::string::npos) << none.out;

  instance_harness harness(moto, home_ / "instances", public_key);
  const auto up = run_ferry({"nodes", "up", "2"}, o);
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  EXPECT_EQ(harness.started(), 2);
  const auto nodes = registry();
  ASSERT_EQ(nodes.size(), 2u);
  for (const auto& n : nodes) {
    EXPECT_EQ(n.at("provider").as_string(), "ec2");
    EXPECT_EQ(std::string(n.at("host").as_string()).rfind("10.200.250.", 0), 0u) << n;
    EXPECT_FALSE(n.at("details").as_object().contains("watchdog")) << n;
    // A shutdown from inside (the idle watchdog's) ends the instance for good.
    const auto behaviour = moto.aws({"ec2", "describe-instance-attribute", "--instance-id",
                                     std::string(n.at("id").as_string()), "--attribute",
                                     "instanceInitiatedShutdownBehavior", "--query",
                                     "InstanceInitiatedShutdownBehavior.Value", "--output", "text"});
    EXPECT_EQ(behaviour.out, "terminate\n") << behaviour.err;
  }
  // Each node is the sshd at its instance's address.
  const auto where = run_ferry({"exec", "--", "sh", "-c", "ip -4 -o addr show | grep -o '10\\.200\\.[0-9.]*'"}, o);
  EXPECT_EQ(where.exit_code, 0) << where.err;
  for (const auto& n : nodes) {
    EXPECT_NE(where.out.find(std::string(n.at("host").as_string())), std::string::npos) << where.out;
  }
  // The EC2 API stops answering: no node can be confirmed ended, so each stays, marked orphaned.
  auto hurried = o;
  hurried.env["FERRY_NET_READ_TIMEOUT"] = "2s";
  hurried.env["FERRY_NET_RETRY_MAX_ATTEMPTS"] = "1";
  moto.freeze();
  const auto unanswered = run_ferry({"nodes", "down", "--all"}, hurried);
  moto.thaw();
  EXPECT_EQ(unanswered.exit_code, 1) << unanswered.err;
  EXPECT_NE(unanswered.err.find("orphaned"), std::string::npos) << unanswered.err;
  const auto kept = registry();
  ASSERT_EQ(kept.size(), 2u);
  for (const auto& n : kept) EXPECT_EQ(n.at("state").as_string(), "orphaned") << n;
  const auto listed = run_ferry({"nodes", "ls"}, o);
  for (const auto& n : nodes)
    EXPECT_NE(listed.out.find(std::string(n.at("id").as_string())), std::string::npos) << listed.out;

  const auto down = run_ferry({"nodes", "down", "--all"}, o);
  EXPECT_EQ(down.exit_code, 0) << down.err;
  const auto states = moto.aws({"ec2", "describe-instances", "--query", "Reservations[].Instances[].State.Name",
                                "--output", "text"});
  EXPECT_EQ(states.out.find("running"), std::string::npos) << states.out;
  EXPECT_NE(states.out.find("terminated"), std::string::npos) << states.out;
}

}  // namespace
}  // namespace ferry::test
