// The ssh provider: hosts from configuration, claims that concurrent commands respect, release without
// touching the host, and readiness against a real sshd standing in for an existing machine. Also the
// provider factory.
#include "config/loader.hpp"
#include "provision/error.hpp"
#include "provision/make_provider.hpp"
#include "provision/ssh/ssh_provider.hpp"

#include <boost/asio/io_context.hpp>

#include "local_fixture.hpp"
#include "support/settings.hpp"

namespace ferry::provision::ssh {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using host = config::nodes_settings::ssh_host;
using test::run_io;
using test::temp_dir;

result<config::loaded_config> load_toml(const temp_dir& dir, const std::string& toml, diagnostics& diag) {
  dir.write("project/ferry.toml", toml);
  config::load_options o;
  o.working_dir = dir / "project";
  o.env = [home = dir.path().string()](std::string_view name) -> std::optional<std::string> {
    if (name == "HOME") return home;
    return std::nullopt;
  };
  return config::load(o, diag);
}

TEST(ssh_hosts_config, reads_strings_and_tables_and_shows_them_again) {
  temp_dir dir;
  diagnostics diag;
  auto loaded = load_toml(dir, R"(
[nodes]
provider = "ssh"
ssh_hosts = ["alice@10.0.0.5:2222", "gpu1", "[fe80::1]:23",
             { host = "10.0.0.9", user = "bob", identity_file = "/k", name = "big" }]
)", diag);
  ASSERT_TRUE(loaded) << diag.message;
  const auto& hosts = loaded->values.nodes.ssh_hosts;
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0], (host{"", "10.0.0.5", 2222, "alice", ""}));
  EXPECT_EQ(hosts[1], (host{"", "gpu1", 22, "", ""}));
  EXPECT_EQ(hosts[2], (host{"", "fe80::1", 23, "", ""}));
  EXPECT_EQ(hosts[3], (host{"big", "10.0.0.9", 22, "bob", "/k"}));
  const auto shown = config::render(*loaded);
  EXPECT_NE(shown.find(R"(nodes.ssh_hosts = [{ host = "10.0.0.5", port = 2222, user = "alice" }, )"), std::string::npos)
      << shown;
  EXPECT_NE(shown.find(R"(nodes.local_network = "auto")"), std::string::npos) << shown;

  // [[nodes.ssh_hosts]] tables work too.
  auto tables =
      load_toml(dir, "[[nodes.ssh_hosts]]\nhost = \"a\"\nport = 2200\n[[nodes.ssh_hosts]]\nhost = \"b\"\n", diag);
  ASSERT_TRUE(tables) << diag.message;
  EXPECT_EQ(tables->values.nodes.ssh_hosts.size(), 2u);
}

TEST(ssh_hosts_config, rejects_bad_hosts_naming_the_place) {
  temp_dir dir;
  for (const auto* bad : {R"(nodes.ssh_hosts = [{ port = 22 }])", R"(nodes.ssh_hosts = ["a:99999"])",
                          R"(nodes.ssh_hosts = [{ host = "a", colour = "red" }])", R"(nodes.ssh_hosts = "a")",
                          R"(nodes.local_network = "bridge")"}) {
    diagnostics diag;
    auto loaded = load_toml(dir, bad, diag);
    ASSERT_FALSE(loaded) << bad;
    EXPECT_NE(diag.message.find("ferry.toml:1:"), std::string::npos) << diag.message;
  }
}

class ssh_claims : public ::testing::Test {
 protected:
  ssh_options options() const {
    ssh_options o;
    o.state_dir = dir / "state" / "ssh";
    o.hosts = {host{"", "10.0.0.1", 22, "", ""}, host{"two", "10.0.0.2", 2222, "alice", "/k2"},
               host{"", "10.0.0.3", 2200, "", ""}};
    o.default_user = "root";
    o.default_identity_file = "/default/key";
    return o;
  }

  temp_dir dir;
  test::trace_root trace{dir / "trace.jsonl", "test:ssh"};
  diagnostics diag;
};

TEST_F(ssh_claims, create_claims_the_first_unclaimed_hosts_across_commands) {
  ssh_provider first(options());
  node_spec two;
  two.count = 2;
  auto a = run_io(first.create(trace.root(), two, diag));
  ASSERT_TRUE(a) << diag.message;
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].id, "ssh-10.0.0.1");
  EXPECT_EQ((*a)[0].user, "root");
  EXPECT_EQ((*a)[0].identity_file, "/default/key");
  EXPECT_EQ((*a)[1].id, "ssh-two");
  EXPECT_EQ((*a)[1].port, 2222);
  EXPECT_EQ((*a)[1].user, "alice");
  EXPECT_EQ((*a)[1].state, node_state::running);

  ssh_provider second(options());  // another ferry command
  node_spec one;
  auto b = run_io(second.create(trace.root(), one, diag));
  ASSERT_TRUE(b) << diag.message;
  EXPECT_EQ(b->front().id, "ssh-10.0.0.3:2200");

  auto none = run_io(second.create(trace.root(), one, diag));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error(), errc::no_free_hosts);
  EXPECT_NE(diag.message.find("only 0 of the 3 hosts"), std::string::npos) << diag.message;
  EXPECT_EQ(run_io(second.list(trace.root(), diag))->size(), 3u);

  // Releasing hands the host out again; the released node reads as terminated.
  ASSERT_TRUE(run_io(first.terminate(trace.root(), (*a)[1], diag))) << diag.message;
  auto released = run_io(first.describe(trace.root(), (*a)[1], diag));
  ASSERT_TRUE(released);
  EXPECT_EQ(released->state, node_state::terminated);
  auto still = run_io(first.describe(trace.root(), (*a)[0], diag));
  ASSERT_TRUE(still);
  EXPECT_EQ(still->state, node_state::running);
  auto again = run_io(second.create(trace.root(), one, diag));
  ASSERT_TRUE(again) << diag.message;
  EXPECT_EQ(again->front().id, "ssh-two");
}

TEST_F(ssh_claims, asking_for_more_than_there_are_claims_nothing) {
  ssh_provider p(options());
  node_spec four;
  four.count = 4;
  auto r = run_io(p.create(trace.root(), four, diag));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::no_free_hosts);
  EXPECT_TRUE(run_io(p.list(trace.root(), diag))->empty());
}

// An "existing machine": a local machine started for the test, handed to the ssh provider by address.
class ssh_real_host : public test::local_fixture {};

TEST_F(ssh_real_host, readiness_logs_into_a_claimed_host_and_release_leaves_it_running) {
  local::machine_spec spec;
  spec.id = "ssh-host-" + std::to_string(::getpid());  // its loopback address follows from the id
  spec.dir = dir / "host";
  spec.mode = local::network_mode::loopback;
  spec.authorized_key = key.public_line;
  spec.command_timeout = 20s;
  auto m = run_io(local::start_machine(trace.root(), spec, diag));
  ASSERT_TRUE(m) << diag.message;
  guard.watch(*m);

  ssh_options o;
  o.state_dir = state / "ssh";
  o.hosts = {host{"box", m->address, m->port, m->user, key.private_key.string()}};
  ssh_provider p(o);
  node_spec one;
  auto claimed = run_io(p.create(trace.root(), one, diag));
  ASSERT_TRUE(claimed) << diag.message;
  auto ready = run_io(wait_ready(trace.root(), p, claimed->front(), login, ready_options(), diag));
  ASSERT_TRUE(ready) << diag.message;
  ASSERT_TRUE(run_io(p.terminate(trace.root(), claimed->front(), diag))) << diag.message;
  EXPECT_EQ(local::status_of(*m), local::machine_status::running);
}

TEST(make_provider, builds_local_and_ssh_and_names_what_it_cannot) {
  boost::asio::io_context io;
  temp_dir dir;
  auto s = test::default_settings(dir.path());
  diagnostics diag;
  auto local = make_provider(io.get_executor(), s, "ssh-ed25519 AAAA test", diag);
  ASSERT_TRUE(local) << diag.message;
  EXPECT_EQ((*local)->name(), "local");

  s.nodes.provider = "ssh";
  auto no_hosts = make_provider(io.get_executor(), s, "", diag);
  ASSERT_FALSE(no_hosts);
  EXPECT_EQ(no_hosts.error(), errc::bad_node_config);
  EXPECT_NE(diag.message.find("nodes.ssh_hosts"), std::string::npos) << diag.message;
  s.nodes.ssh_hosts = {host{"", "10.0.0.1", 22, "", ""}};
  auto ssh = make_provider(io.get_executor(), s, "", diag);
  ASSERT_TRUE(ssh) << diag.message;
  EXPECT_EQ((*ssh)->name(), "ssh");

  s.nodes.provider = "vagrant";
  auto unknown = make_provider(io.get_executor(), s, "", diag);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error(), errc::unknown_provider);
  EXPECT_NE(diag.message.find("\"vagrant\""), std::string::npos) << diag.message;
}

}  // namespace
}  // namespace ferry::provision::ssh
