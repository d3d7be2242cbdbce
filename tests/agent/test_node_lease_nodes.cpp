// A pool lease on a real local node (sshd in its own network namespace, agent/provide/node_lease.hpp):
// the agent sets the lease's expiry there with set_node_lease and runs a command wrapped in it with
// wrap_in_lease over a real ssh link; once the lease expires the node ends the command by itself, and the
// run's exit says so (124 and lease-run's stderr line). The node's cache directory is its XDG default,
// as the node's shell expands it.
#include "agent/node/lease_watch.hpp"
#include "agent/provide/node_lease.hpp"
#include "net/exec_streams.hpp"
#include "net/ssh_connect.hpp"
#include "net/ssh_keys.hpp"
#include "net/ssh_node_link.hpp"
#include "provision/local/local_provider.hpp"

#include "../provision/local_fixture.hpp"
#include "support/settings.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <ctime>

// A namespace of its own: the test binary is a unity build.
namespace ferry::agent::lease_nodes_tests {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct leased_outcome {
  net::command_output run;     // the command under the expired lease
  net::command_output after;   // `kill -0` of the command's pid, afterwards
};

// Runs `script` under lease `lease` (expiring at `expires_at`) on the node, then asks the node whether the
// command's process (its pid in $XDG_CACHE_HOME/lease-command.pid) still runs.
asio::awaitable<result<leased_outcome>> run_leased(tracing::action& root, net::ssh_peer peer,
                                                   const net::ssh_client_options& options, std::string lease,
                                                   std::int64_t expires_at, std::string script, diagnostics& diag) {
  auto session = co_await net::ssh_connect(root, peer, options, diag);
  if (!session) co_return session.error();
  net::ssh_node_link link(*session);
  diagnostics load_diag;
  auto loaded = load_node_program(FERRY_NODE_PROGRAM, load_diag);
  if (!loaded) throw std::runtime_error(load_diag.message);
  const auto& program = **loaded;
  auto installed = co_await install_node_program(root, link, program, "", "", diag);
  if (!installed) co_return installed.error();
  auto set = co_await set_node_lease(root, link, program, "", lease, expires_at, diag);
  if (!set) co_return set.error();
  environment env;
  env.workdir = "/tmp";
  auto line = task_command(env, "task-id", {{"LEASE_TEST", "passed on stdin"}}, {"sh", "-c", script});
  wrap_in_lease(line, program, "", lease, 1s);
  leased_outcome out;
  {
    net::buffer_source input(line.input);
    net::collect_sink sink(1 << 20);
    const net::exec_request request{line.command, &input, &sink};
    auto done = co_await link.exec(root, request, diag);
    if (!done) co_return done.error();
    out.run = {*done, sink.out, sink.err};
  }
  {
    net::collect_sink sink(1 << 20);
    const net::exec_request request{"kill -0 \"$(cat \"$XDG_CACHE_HOME/lease-command.pid\")\"", nullptr, &sink};
    auto done = co_await link.exec(root, request, diag);
    if (!done) co_return done.error();
    out.after = {*done, sink.out, sink.err};
  }
  (*session)->close();
  co_return out;
}

class node_lease_on_a_local_node : public test::local_fixture {};

TEST_F(node_lease_on_a_local_node, a_command_whose_lease_expired_is_ended_by_the_node_and_its_exit_says_so) {
  // ferry's own settings, and the fixture's key (which readiness logs in with, and the node authorizes) as
  // ferry's own key.
  net::ssh_client_options client;
  client.settings = test::default_settings(dir.path()).ssh;
  client.settings.kex = "curve25519-sha256";
  client.config_dir = dir / "config";
  client.known_hosts = dir / "config" / "known_hosts";
  fs::create_directories(client.config_dir);
  fs::copy_file(key.private_key, client.config_dir / "id_ed25519");
  fs::copy_file(fs::path(key.private_key).concat(".pub"), client.config_dir / "id_ed25519.pub");
  ASSERT_TRUE(net::ensure_own_key(client.config_dir, diag)) << diag.message;
  provision::local::local_provider provider(options(provision::local::network_mode::netns));
  provision::node_spec spec;
  auto made = test::run_io(provider.create(trace.root(), spec, diag));
  ASSERT_TRUE(made && made->size() == 1u) << diag.message;
  const auto target = made->front();
  auto ready = test::run_io(provision::wait_ready(trace.root(), provider, target, login, ready_options(), diag));
  ASSERT_TRUE(ready) << diag.message;

  const std::string lease = "lease-on-node-1";
  const auto expires = static_cast<std::int64_t>(std::time(nullptr)) + 3;
  const auto got = test::run_io(run_leased(
      trace.root(), {target.id, target.host, target.port, target.user}, client, lease, expires,
      "echo $$ > \"$XDG_CACHE_HOME/lease-command.pid\"; echo \"$LEASE_TEST\"; exec sleep 600", diag));
  ASSERT_TRUE(got) << diag.message;
  EXPECT_EQ(got->run.out, "passed on stdin\n");
  EXPECT_EQ(got->run.exit.status, node::lease_expired_exit) << got->run.exit.describe() << ": " << got->run.err;
  EXPECT_EQ(got->run.err, fmt::format("ferry-node: lease {} expired at {}: command ended\n", lease, expires));
  EXPECT_NE(got->after.exit.status, 0) << "the command still runs on the node";
  // The lease file is in the node's own cache directory (its XDG_CACHE_HOME).
  EXPECT_EQ(test::read_file(state / "local" / target.id / "cache" / "ferry" / "leases" / lease),
            fmt::format("{}\n", expires));
}

}  // namespace
}  // namespace ferry::agent::lease_nodes_tests
