// ferry's own SSH key and its known_hosts file: the parts of the SSH layer that need no server.
#include "net/error.hpp"
#include "net/ssh_keys.hpp"
#include "net/ssh_known_hosts.hpp"

#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

namespace ferry::net {
namespace {

using test::temp_dir;

mode_t mode_of(const std::filesystem::path& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return st.st_mode & 07777;
}

TEST(ssh_keys, ferrys_key_is_made_on_first_use_and_reused_after) {
  temp_dir dir;
  const auto config = dir / "config";
  diagnostics diag;
  auto first = ensure_own_key(config, diag);
  ASSERT_TRUE(first) << diag.message;
  EXPECT_EQ(first->rfind("ssh-ed25519 AAAA", 0), 0u) << *first;
  EXPECT_EQ(mode_of(own_key_path(config)), 0600u);
  EXPECT_EQ(mode_of(config), 0700u);
  const auto private_text = test::read_file(own_key_path(config));
  EXPECT_EQ(private_text.rfind("-----BEGIN OPENSSH PRIVATE KEY-----", 0), 0u);
  EXPECT_EQ(test::read_file(own_key_path(config).string() + ".pub"), *first + "\n");
  // OpenSSH reads it too: its idea of the public half is ferry's.
  const auto derived = test::run({"ssh-keygen", "-y", "-f", own_key_path(config).string()});
  ASSERT_EQ(derived.exit_code, 0) << derived.err;
  EXPECT_EQ(derived.out.substr(0, derived.out.find('\n')), first->substr(0, first->rfind(' ')));
  // No temporary file is left beside it.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(config)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"id_ed25519", "id_ed25519.pub"}));

  auto second = ensure_own_key(config, diag);
  ASSERT_TRUE(second) << diag.message;
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(test::read_file(own_key_path(config)), private_text);

  // A lost .pub comes back from the private key.
  std::filesystem::remove(own_key_path(config).string() + ".pub");
  auto third = ensure_own_key(config, diag);
  ASSERT_TRUE(third) << diag.message;
  EXPECT_EQ(*third, *first);
  EXPECT_TRUE(std::filesystem::exists(own_key_path(config).string() + ".pub"));
}

TEST(ssh_keys, an_unreadable_key_is_an_error_that_names_the_file) {
  temp_dir dir;
  const auto config = dir / "config";
  dir.write("config/id_ed25519", "not a key\n");
  diagnostics diag;
  auto r = ensure_own_key(config, diag);
  EXPECT_EQ(r.error(), make_error_code(errc::ssh_key_error));
  EXPECT_NE(diag.message.find(own_key_path(config).string()), std::string::npos) << diag.message;
}

public_key_info key_of(const temp_dir& dir, const std::string& name) {
  diagnostics diag;
  auto line = ensure_own_key(dir / name, diag);
  if (!line) throw std::runtime_error(diag.message);
  auto key = load_private_key(own_key_path(dir / name), diag);
  auto info = describe_key(key->get());
  return *info;
}

TEST(ssh_known_hosts, trusts_new_nodes_knows_them_again_and_refuses_a_changed_key) {
  temp_dir dir;
  const auto file = dir / "known_hosts";
  const auto a = key_of(dir, "a");
  const auto b = key_of(dir, "b");
  diagnostics diag;
  EXPECT_EQ(check_host_key(file, "n1", a, diag).value(), host_key_status::trusted);
  EXPECT_EQ(mode_of(file), 0600u);
  EXPECT_EQ(check_host_key(file, "n1", a, diag).value(), host_key_status::known);
  EXPECT_EQ(check_host_key(file, "n2", b, diag).value(), host_key_status::trusted);
  EXPECT_EQ(test::read_file(file), "n1 " + a.type + " " + a.base64 + "\nn2 " + b.type + " " + b.base64 + "\n");

  auto changed = check_host_key(file, "n1", b, diag);
  EXPECT_EQ(changed.error(), make_error_code(errc::host_key_changed));
  for (const auto& part : {std::string("n1"), file.string() + ":1", a.fingerprint, b.fingerprint})
    EXPECT_NE(diag.message.find(part), std::string::npos) << part << "\n" << diag.message;

  EXPECT_EQ(recorded_host_key(file, "n2", diag).value()->base64, b.base64);
  EXPECT_FALSE(recorded_host_key(file, "n3", diag).value());
  // A destroyed node is forgotten; its id may come back with another key.
  ASSERT_FALSE(forget_host_key(file, "n1", diag));
  EXPECT_EQ(check_host_key(file, "n1", b, diag).value(), host_key_status::trusted);
}

TEST(ssh_known_hosts, a_malformed_file_and_a_bad_node_id_are_errors) {
  temp_dir dir;
  const auto file = dir.write("known_hosts", "# comment\n\nn1 ssh-ed25519\n");
  const auto a = key_of(dir, "a");
  diagnostics diag;
  EXPECT_EQ(check_host_key(file, "n2", a, diag).error(), make_error_code(errc::known_hosts_error));
  EXPECT_NE(diag.message.find(file.string() + ":3"), std::string::npos) << diag.message;
  const auto ok = dir / "ok";
  EXPECT_EQ(check_host_key(ok, "bad id", a, diag).error(), make_error_code(errc::known_hosts_error));
  // A file without its last newline still gets records of their own lines.
  const auto partial = dir.write("partial", "n1 " + a.type + " " + a.base64);
  auto added = check_host_key(partial, "n2", a, diag);
  ASSERT_TRUE(added) << diag.message;
  EXPECT_EQ(*added, host_key_status::trusted);
  auto again = check_host_key(partial, "n1", a, diag);
  ASSERT_TRUE(again) << diag.message << "\n" << test::read_file(partial);
  EXPECT_EQ(*again, host_key_status::known);
}

}  // namespace
}  // namespace ferry::net
