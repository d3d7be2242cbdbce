// A pool tenant's Unix user on a shared node: the name the agent derives, the names the node program
// accepts, and its line in /etc/passwd (the node program reads the file itself: it is static).
#include "agent/node/plan.hpp"
#include "agent/node/tenant_user.hpp"
#include "agent/pool/tenant_name.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <variant>

namespace ferry::agent {
namespace {

TEST(tenant_user, a_tenants_user_is_ferry_and_its_name_within_32_characters) {
  EXPECT_EQ(pool::tenant_user_name("ann"), "ferry-ann");
  EXPECT_EQ(pool::tenant_user_name("bob-ws_example_org"), "ferry-bob-ws_example_org");
  EXPECT_EQ(pool::tenant_user_name(""), "");
  const std::string just(26, 'a');
  EXPECT_EQ(pool::tenant_user_name(just), "ferry-" + just);
  // Longer: cut, and told apart by a hash of the whole name.
  const auto one = pool::tenant_user_name(std::string(27, 'a'));
  const auto two = pool::tenant_user_name(std::string(26, 'a') + "b");
  const auto three = pool::tenant_user_name(std::string(32, 'a'));
  EXPECT_EQ(one.size(), 32u);
  EXPECT_EQ(one.substr(0, 24), "ferry-" + std::string(17, 'a') + "-");
  EXPECT_EQ(std::set<std::string>({one, two, three}).size(), 3u);
  EXPECT_EQ(pool::tenant_user_name(std::string(27, 'a')), one) << "the same tenant, the same user";
  for (const auto& name : {one, two, three, pool::tenant_user_name("ann")}) EXPECT_TRUE(node::tenant_user_ok(name)) << name;
}

TEST(tenant_user, the_node_program_makes_users_of_ferry_names_only) {
  EXPECT_TRUE(node::tenant_user_ok("ferry-ann"));
  EXPECT_TRUE(node::tenant_user_ok("ferry-_3d-team"));
  for (const auto* bad : {"root", "ann", "ferry-", "ferry-Ann", "ferry-a;b", "ferry-a b", "ferry-a/../b",
                          "ferry-aaaaaaaaaaaaaaaaaaaaaaaaaaa", "-ferry-a", "ferry-a\n"})
    EXPECT_FALSE(node::tenant_user_ok(bad)) << bad;
}

TEST(tenant_user, a_users_line_is_found_in_passwd_and_told_apart_from_an_account_ferry_did_not_make) {
  const std::string passwd =
      "root:x:0:0:root:/root:/bin/bash\n"
      "broken-line\n"
      "ferry-bad:x:notanumber:1001:ferry tenant:/home/ferry-bad:/bin/sh\n"
      "ferry-ann:x:1001:1002:ferry tenant:/home/ferry-ann:/bin/sh\n"
      "ferry-bob:x:1003:1003:Bob the admin:/home/ferry-bob:/bin/bash";  // no final newline
  const auto ann = node::find_passwd(passwd, "ferry-ann");
  ASSERT_TRUE(ann);
  EXPECT_EQ(ann->uid, 1001u);
  EXPECT_EQ(ann->gid, 1002u);
  EXPECT_EQ(ann->home, "/home/ferry-ann");
  EXPECT_TRUE(node::made_for_tenant(*ann));
  const auto bob = node::find_passwd(passwd, "ferry-bob");
  ASSERT_TRUE(bob);
  EXPECT_FALSE(node::made_for_tenant(*bob)) << "someone else's account of a ferry- name";
  EXPECT_FALSE(node::find_passwd(passwd, "ferry-bad"));
  EXPECT_FALSE(node::find_passwd(passwd, "ferry-cat"));
  EXPECT_FALSE(node::find_passwd(passwd, "ferry"));
  const auto root = node::find_passwd(passwd, "root");
  ASSERT_TRUE(root);
  EXPECT_FALSE(node::made_for_tenant(*root));
}

TEST(tenant_user, the_plan_header_carries_the_tenant_and_refuses_a_name_that_is_not_one) {
  node::plan_header h;
  h.task_id = "t";
  h.tenant = "ferry-ann";
  diagnostics diag;
  auto parsed = node::parse_plan_line(node::header_line(h), diag);
  ASSERT_TRUE(parsed) << diag.message;
  EXPECT_EQ(std::get<node::plan_header>(*parsed).tenant, "ferry-ann");
  h.tenant.clear();
  parsed = node::parse_plan_line(node::header_line(h), diag);
  ASSERT_TRUE(parsed) << diag.message;
  EXPECT_EQ(std::get<node::plan_header>(*parsed).tenant, "");
  h.tenant = "root";
  EXPECT_FALSE(node::parse_plan_line(node::header_line(h), diag));
  EXPECT_NE(diag.message.find("header.tenant 'root'"), std::string::npos) << diag.message;
}

}  // namespace
}  // namespace ferry::agent
