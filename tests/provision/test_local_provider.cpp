// The local provider with real sshd processes: nodes in their own network namespaces on the ferry0 bridge,
// logged into with OpenSSH's client, waited for by readiness, terminated for sure.
#include "provision/command.hpp"
#include "provision/error.hpp"
#include "provision/local/process_table.hpp"
#include "provision/node_registry.hpp"

#include "local_fixture.hpp"

#include <algorithm>
#include <csignal>
#include <optional>
#include <set>
#include <thread>

namespace ferry::provision::local {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
using test::run_io;

bool process_gone(int pid) {
  const auto info = read_process(pid);
  return !info || info->state == 'Z';
}

std::set<std::string> ids(const std::vector<node>& nodes) {
  std::set<std::string> out;
  for (const auto& n : nodes) out.insert(n.id);
  return out;
}

std::string detail(const node& n, std::string_view key) {
  const auto* v = n.details.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

int pid_of(const node& n) { return static_cast<int>(n.details.at("pid").to_number<std::int64_t>()); }

class local_netns : public test::local_fixture {
 protected:
  // One node made by `p` with sshd answering and a login working; nullopt (the test failed) when not.
  std::optional<node> one_ready_node(local_provider& p) {
    node_spec spec;
    auto made = run_io(p.create(trace.root(), spec, diag));
    EXPECT_TRUE(made) << diag.message;
    if (!made || made->empty()) return std::nullopt;
    auto ready = run_io(wait_ready(trace.root(), p, made->front(), login, ready_options(), diag));
    EXPECT_TRUE(ready) << diag.message;
    if (!ready) return std::nullopt;
    return made->front();
  }
};

TEST_F(local_netns, two_nodes_each_in_its_own_namespace_reachable_fresh_and_ready) {
  local_provider p(options(network_mode::netns));
  node_spec spec;
  spec.count = 2;
  auto made = run_io(p.create(trace.root(), spec, diag));
  ASSERT_TRUE(made) << diag.message;
  ASSERT_EQ(made->size(), 2u);
  const auto& a = (*made)[0];
  const auto& b = (*made)[1];
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(a.name, "node-1");
  EXPECT_EQ(b.name, "node-2");
  EXPECT_NE(a.host, b.host);
  for (const auto& n : *made) {
    EXPECT_EQ(n.provider, "local");
    EXPECT_TRUE(node_index(n.host)) << n.host << " is not a node address in 10.200.0.0/16";
    EXPECT_EQ(n.port, 22);
    EXPECT_EQ(n.user, "root");
    EXPECT_EQ(detail(n, "netns"), "ferry-" + n.id);
    EXPECT_TRUE(netns_exists(detail(n, "netns")));
    EXPECT_TRUE(link_exists(detail(n, "veth")));
    EXPECT_TRUE(fs::is_directory(state / "local" / n.id / "home"));
    EXPECT_TRUE(detail(n, "host_key").starts_with("ssh-ed25519 "));
  }

  auto ready = run_io(wait_ready_all(trace.root(), p, *made, login, ready_options(), diag));
  ASSERT_TRUE(ready) << diag.message;
  for (const auto& n : *ready) EXPECT_EQ(n.state, node_state::running);

  for (const auto& n : *made) {
    SCOPED_TRACE(n.name);
    // The home is the node's own empty dir: no .bashrc, so root's pyenv init never ran (PYENV_SHELL unset).
    const auto r = test::ssh_exec(key.private_key, n,
                                  "echo $HOME; pwd; ls -A ~; echo \"pyenv:${PYENV_SHELL:-none}\"; "
                                  "echo \"cache:$XDG_CACHE_HOME\"; ip -4 -o addr show | awk '{print $4}' | sort");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto out = lines(r.out);
    ASSERT_EQ(out.size(), 6u) << r.out;
    EXPECT_EQ(out[0], "/root");
    EXPECT_EQ(out[1], "/root");  // a login starts in the (empty) home
    EXPECT_EQ(out[2], "pyenv:none");
    EXPECT_EQ(out[3], "cache:" + (state / "local" / n.id / "cache").string());
    // Its only addresses: its own and loopback's.
    EXPECT_EQ(out[4], n.host + "/16");
    EXPECT_EQ(out[5], "127.0.0.1/8");
  }
  // Nodes reach each other over the bridge.
  const auto across = test::ssh_exec(key.private_key, a,
                                     "timeout 5 bash -c 'exec 3<>/dev/tcp/" + b.host + "/22; head -c 8 <&3'");
  EXPECT_EQ(across.out, "SSH-2.0-") << across.err;
}

TEST_F(local_netns, terminate_ends_sshd_sessions_namespace_veth_and_dir) {
  local_provider p(options(network_mode::netns));
  const auto made = one_ready_node(p);
  ASSERT_TRUE(made);
  const auto n = *made;
  // A process that left the ssh session (its own session, like a daemon): terminate must end it too.
  const auto bg = test::ssh_exec(key.private_key, n, "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!");
  ASSERT_EQ(bg.exit_code, 0) << bg.err;
  const int straggler = std::stoi(bg.out);
  ASSERT_FALSE(process_gone(straggler));
  const int sshd = pid_of(n);
  ASSERT_FALSE(process_gone(sshd));

  ASSERT_TRUE(run_io(p.terminate(trace.root(), n, diag))) << diag.message;
  EXPECT_TRUE(process_gone(sshd));
  EXPECT_TRUE(process_gone(straggler));
  EXPECT_FALSE(netns_exists(detail(n, "netns")));
  EXPECT_FALSE(link_exists(detail(n, "veth")));
  EXPECT_FALSE(fs::exists(state / "local" / n.id));

  auto described = run_io(p.describe(trace.root(), n, diag));
  ASSERT_TRUE(described) << diag.message;
  EXPECT_EQ(described->state, node_state::terminated);
  auto listed = run_io(p.list(trace.root(), diag));
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty());
  // Terminating it again is fine.
  EXPECT_TRUE(run_io(p.terminate(trace.root(), n, diag))) << diag.message;
}

TEST_F(local_netns, boot_delay_keeps_a_node_pending_and_readiness_waits_for_it) {
  local_provider p(options(network_mode::netns, 1500ms));
  node_spec spec;
  const auto start = clock::now();
  auto made = run_io(p.create(trace.root(), spec, diag));
  ASSERT_TRUE(made) << diag.message;
  EXPECT_EQ(made->front().state, node_state::pending);
  auto described = run_io(p.describe(trace.root(), made->front(), diag));
  ASSERT_TRUE(described) << diag.message;
  EXPECT_EQ(described->state, node_state::pending);
  EXPECT_FALSE(process_gone(pid_of(made->front())));  // its launcher sleeps

  auto ready = run_io(wait_ready(trace.root(), p, made->front(), login, ready_options(), diag));
  ASSERT_TRUE(ready) << diag.message;
  EXPECT_GE(clock::now() - start, 1400ms);
  EXPECT_EQ(ready->state, node_state::running);
  // Polls saw it pending before it ran.
  const auto text = trace.flushed_text();
  EXPECT_NE(text.find(R"("state":"pending")"), std::string::npos);
}

TEST_F(local_netns, a_node_whose_sshd_was_killed_by_hand_is_terminated_and_readiness_says_so_at_once) {
  local_provider p(options(network_mode::netns));
  const auto made = one_ready_node(p);
  ASSERT_TRUE(made);
  const auto n = *made;
  ASSERT_EQ(::kill(pid_of(n), SIGKILL), 0);
  for (int i = 0; i < 100 && !process_gone(pid_of(n)); ++i) std::this_thread::sleep_for(10ms);

  auto described = run_io(p.describe(trace.root(), n, diag));
  ASSERT_TRUE(described) << diag.message;
  EXPECT_EQ(described->state, node_state::terminated);
  EXPECT_FALSE(detail(*described, "state_reason").empty());

  const auto start = clock::now();
  auto ready = run_io(wait_ready(trace.root(), p, n, login, ready_options(60s), diag));
  ASSERT_FALSE(ready);
  EXPECT_EQ(ready.error(), errc::node_terminated);
  EXPECT_LT(clock::now() - start, 2s);
  EXPECT_NE(diag.message.find(n.id), std::string::npos) << diag.message;

  // Its namespace outlived the sshd; terminate still clears it.
  EXPECT_TRUE(netns_exists(detail(n, "netns")));
  ASSERT_TRUE(run_io(p.terminate(trace.root(), n, diag))) << diag.message;
  EXPECT_FALSE(netns_exists(detail(n, "netns")));
}

// What a node's idle watchdog does: the self-stop command, run detached inside the node.
TEST_F(local_netns, a_node_that_stopped_itself_is_stopped_and_terminate_still_cleans_it_up) {
  local_provider p(options(network_mode::netns));
  const auto made = one_ready_node(p);
  ASSERT_TRUE(made);
  const auto n = *made;
  const auto bg = test::ssh_exec(key.private_key, n, "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!");
  ASSERT_EQ(bg.exit_code, 0) << bg.err;
  const int straggler = std::stoi(bg.out);
  const int sshd = pid_of(n);
  const auto stop = p.self_stop_command(n);
  ASSERT_FALSE(stop.empty());
  // The connection running this may be ended by the command it starts: its exit is not looked at.
  test::ssh_exec(key.private_key, n,
                 "FERRY_STOP_REASON='stopped itself: idle in a test' setsid /bin/sh -c " + shell_quote(stop) +
                     " </dev/null >/dev/null 2>&1 &");
  node now = n;
  for (int i = 0; i < 600 && now.state != node_state::stopped; ++i) {
    auto described = run_io(p.describe(trace.root(), n, diag));
    ASSERT_TRUE(described) << diag.message;
    now = *described;
    if (now.state != node_state::stopped) std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(now.state, node_state::stopped) << to_string(now.state);
  EXPECT_EQ(detail(now, "state_reason"), "stopped itself: idle in a test");
  EXPECT_TRUE(process_gone(sshd));
  for (int i = 0; i < 200 && !process_gone(straggler); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(process_gone(straggler)) << "a process the node left running outlived its stop";
  auto listed = run_io(p.list(trace.root(), diag));
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().state, node_state::stopped);

  // What is left (namespace, veth, dir) goes with terminate, as for any node.
  EXPECT_TRUE(netns_exists(detail(n, "netns")));
  ASSERT_TRUE(run_io(p.terminate(trace.root(), n, diag))) << diag.message;
  EXPECT_FALSE(netns_exists(detail(n, "netns")));
  EXPECT_FALSE(link_exists(detail(n, "veth")));
  EXPECT_FALSE(fs::exists(state / "local" / n.id));
}

TEST_F(local_netns, list_and_registry_agree_and_nodes_outlive_the_provider_object) {
  node_registry reg(registry_file(state), 10s);
  std::vector<node> made;
  {
    local_provider p(options(network_mode::netns));
    node_spec spec;
    spec.count = 2;
    auto created = run_io(p.create(trace.root(), spec, diag));
    ASSERT_TRUE(created) << diag.message;
    made = *created;
    for (const auto& n : made) ASSERT_TRUE(run_io(reg.add(trace.root(), n, diag))) << diag.message;
  }
  // A later command: a new provider over the same state dir.
  local_provider later(options(network_mode::netns));
  auto listed = run_io(later.list(trace.root(), diag));
  ASSERT_TRUE(listed) << diag.message;
  EXPECT_EQ(ids(*listed), ids(*reg.load(diag)));
  EXPECT_EQ(ids(*listed), ids(made));
  auto ready = run_io(wait_ready_all(trace.root(), later, *listed, login, ready_options(), diag));
  ASSERT_TRUE(ready) << diag.message;

  ASSERT_TRUE(run_io(later.terminate(trace.root(), made[0], diag))) << diag.message;
  ASSERT_TRUE(run_io(reg.remove(trace.root(), made[0].id, diag))) << diag.message;
  listed = run_io(later.list(trace.root(), diag));
  ASSERT_TRUE(listed);
  EXPECT_EQ(ids(*listed), ids(*reg.load(diag)));
  EXPECT_EQ(ids(*listed), std::set<std::string>{made[1].id});
  // A new node takes the name that was freed.
  node_spec one;
  auto again = run_io(later.create(trace.root(), one, diag));
  ASSERT_TRUE(again) << diag.message;
  EXPECT_EQ(again->front().name, made[0].name);
}

// The loopback mode, which ferry uses without root, chosen through the constructor even as root.
TEST_F(local_netns, loopback_mode_gives_a_127_address_and_a_free_port) {
  local_provider p(options(network_mode::loopback));
  node_spec spec;
  auto made = run_io(p.create(trace.root(), spec, diag));
  ASSERT_TRUE(made) << diag.message;
  const auto n = made->front();
  EXPECT_TRUE(n.host.starts_with("127.0.")) << n.host;
  EXPECT_NE(n.host, "127.0.0.1");
  EXPECT_NE(n.port, 22);
  EXPECT_EQ(detail(n, "netns"), "");
  ASSERT_TRUE(run_io(wait_ready(trace.root(), p, n, login, ready_options(), diag)))
      << diag.message;
  const auto r = test::ssh_exec(key.private_key, n, "echo $HOME; ls -A ~; echo \"pyenv:${PYENV_SHELL:-none}\"");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "/root\npyenv:none\n");
  const int sshd = pid_of(n);
  ASSERT_TRUE(run_io(p.terminate(trace.root(), n, diag))) << diag.message;
  EXPECT_TRUE(process_gone(sshd));
  EXPECT_FALSE(fs::exists(state / "local" / n.id));
}

}  // namespace
}  // namespace ferry::provision::local
