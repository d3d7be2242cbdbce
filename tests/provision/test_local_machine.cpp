// A local machine on its own: the files that describe it, /proc parsing, and start_machine at a given
// address (how the ec2 tests turn a fake instance's private IP into a real SSH host).
#include "provision/error.hpp"
#include "provision/local/machine.hpp"
#include "provision/local/network.hpp"
#include "provision/local/process_table.hpp"
#include "provision/local/sshd_files.hpp"

#include "local_fixture.hpp"

namespace ferry::provision::local {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::run_io;

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

sshd_layout layout(bool root, std::chrono::milliseconds delay) {
  return {"local-abc123", "/state dir/local/local-abc123", "10.200.3.4", 22, root ? "ferry-local-abc123" : "",
          root, "/root", "/usr/sbin/sshd", delay};
}

TEST(sshd_files, config_authorizes_only_the_key_file_and_prefers_curve25519) {
  const auto text = sshd_config_text(layout(true, {}));
  for (const auto* line : {"ListenAddress 10.200.3.4\n", "Port 22\n", "UsePAM no\n", "PasswordAuthentication no\n",
                           "KexAlgorithms curve25519-sha256\n", "PidFile none\n",
                           "AuthorizedKeysFile \"/state dir/local/local-abc123/authorized_keys\"\n",
                           "HostKey \"/state dir/local/local-abc123/ssh_host_ed25519_key\"\n",
                           "SetEnv \"XDG_CACHE_HOME=/state dir/local/local-abc123/cache\"\n"})
    EXPECT_TRUE(contains(text, line)) << line << " missing from:\n" << text;
  EXPECT_FALSE(contains(text, "\"HOME=")) << "the mount namespace moves the home, not the variable";
  EXPECT_TRUE(contains(sshd_config_text(layout(false, {})), "\"HOME=/state dir/local/local-abc123/home\""));
}

TEST(sshd_files, boot_script_enters_the_namespaces_and_covers_the_home) {
  const auto text = boot_script_text(layout(true, 1500ms));
  EXPECT_TRUE(contains(text, "sleep 1.500\n")) << text;
  EXPECT_TRUE(contains(text, "exec nsenter --net='/run/netns/ferry-local-abc123' -- unshare --mount")) << text;
  EXPECT_TRUE(contains(text, "mount --bind '\\''/state dir/local/local-abc123/home'\\'' '\\''/root'\\''")) << text;
  EXPECT_TRUE(contains(text, "exec '\\''/usr/sbin/sshd'\\'' -D -e -f")) << text;
  // Tenants of a pool see only their own processes, and the shared layer cache is the node's own.
  EXPECT_TRUE(contains(text, "mount -t proc -o hidepid=invisible proc /proc || exit 1\n")) << text;
  EXPECT_TRUE(contains(text, "mount --bind '\\''/state dir/local/local-abc123/var-cache'\\'' /var/cache")) << text;
  const auto plain = boot_script_text(layout(false, {}));
  EXPECT_FALSE(contains(plain, "sleep"));
  EXPECT_FALSE(contains(plain, "unshare"));
  EXPECT_TRUE(contains(plain, "exec '/usr/sbin/sshd' -D -e -f '/state dir/local/local-abc123/sshd_config'\n")) << plain;
}

TEST(process_table, parses_stat_lines_whose_name_holds_spaces_and_parentheses) {
  const auto info = parse_stat(
      "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 835 0 10 0 0 1 0 0 20 0 1 0 1528149 13979648 1000\n");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->comm, "a) b (c)");
  EXPECT_EQ(info->state, 'S');
  EXPECT_EQ(info->ppid, 1);
  EXPECT_EQ(info->start_time, 1528149u);
  EXPECT_FALSE(parse_stat("garbage"));
  const auto self = read_process(::getpid());
  ASSERT_TRUE(self);
  EXPECT_EQ(self->ppid, ::getppid());
}

TEST(network, node_addresses_stay_inside_10_200_and_avoid_the_bridge) {
  EXPECT_EQ(node_index("10.200.3.4"), 0x0304);
  EXPECT_EQ(node_address(0x0304), "10.200.3.4");
  EXPECT_EQ(veth_name(0x0304), "ferryv-0304");
  for (const auto* bad : {"10.200.0.1", "10.200.0.0", "10.200.255.255", "10.200.7.0", "10.201.1.1", "127.0.0.1",
                          "10.0.0.5", "not an address"})
    EXPECT_FALSE(node_index(bad)) << bad;
  const auto candidates = candidate_indexes("local-abc123", 300);
  EXPECT_EQ(candidates.size(), 300u);
  for (auto c : candidates) EXPECT_TRUE(node_index(node_address(c))) << node_address(c);
  EXPECT_LE(veth_name(0xffff).size(), 15u);  // IFNAMSIZ
}

class machine_at_address : public test::local_fixture {
 protected:
  // An address other test runs on this machine are unlikely to hold at the same moment: from the pid,
  // in 10.200.240-254.x, its last byte never 0 or 255 (no node address ends so).
  std::string address() const {
    const auto pid = static_cast<unsigned>(::getpid());
    return node_address(static_cast<std::uint16_t>(((0xf0 + pid / 250 % 0x0f) << 8) | (2 + pid % 250)));
  }

  machine_spec spec(std::string id, std::string address) const {
    machine_spec s;
    s.id = std::move(id);
    s.dir = dir / s.id;
    s.address = std::move(address);
    s.authorized_key = key.public_line;
    s.command_timeout = 20s;
    return s;
  }
};

TEST_F(machine_at_address, starts_a_detached_sshd_at_the_given_address_and_refuses_it_twice) {
  const auto want = address();
  const auto first_spec = spec("i-0123456789abcdef0", want);
  auto m = run_io(start_machine(trace.root(), first_spec, diag));
  ASSERT_TRUE(m) << diag.message;
  guard.watch(*m);
  EXPECT_EQ(m->address, want);
  EXPECT_EQ(m->netns, "ferry-i-0123456789abcdef0");

  node n;
  n.id = m->id;
  n.host = m->address;
  n.port = m->port;
  n.user = m->user;
  diagnostics login_diag;
  auto logged_in = run_io(test::openssh_true(n, key.private_key, 10s, login_diag));
  for (int i = 0; i < 50 && !logged_in; ++i) {  // the sshd may still be starting
    std::this_thread::sleep_for(20ms);
    logged_in = run_io(test::openssh_true(n, key.private_key, 10s, login_diag));
  }
  ASSERT_TRUE(logged_in) << login_diag.message;
  EXPECT_EQ(status_of(*m), machine_status::running);

  const auto second_spec = spec("i-0fedcba987654321", want);
  auto twice = run_io(start_machine(trace.root(), second_spec, diag));
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error(), errc::local_setup_failed);
  EXPECT_TRUE(contains(diag.message, "taken")) << diag.message;
  EXPECT_FALSE(netns_exists("ferry-i-0fedcba987654321")) << "a failed start leaves nothing behind";

  ASSERT_TRUE(run_io(stop_machine(trace.root(), *m, 10s, diag))) << diag.message;
  EXPECT_EQ(status_of(*m), machine_status::gone);
  EXPECT_FALSE(netns_exists(m->netns));
  EXPECT_FALSE(link_exists(m->veth));
  EXPECT_TRUE(fs::exists(m->dir / "sshd.log")) << "the dir (and its log) stays for the caller";
}

TEST_F(machine_at_address, refuses_addresses_outside_the_node_range) {
  const auto outside = spec("i-outside", "10.0.0.5");
  auto m = run_io(start_machine(trace.root(), outside, diag));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error(), errc::local_setup_failed);
  EXPECT_TRUE(contains(diag.message, "10.0.0.5 is not a node address in 10.200.0.1/16")) << diag.message;
  EXPECT_FALSE(netns_exists("ferry-i-outside"));
}

}  // namespace
}  // namespace ferry::provision::local
