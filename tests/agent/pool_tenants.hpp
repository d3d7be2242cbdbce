#pragma once
// The workstations of the tests of a team's pool: three tenants (ann, bob, cat) that share nothing but
// storage, each with a HOME of its own (so its own config, key, state and cache) and a project, against one
// moto_server that answers one request at a time (moto checks If-Match and stores without a lock; S3 does
// both at once), bucket "team", pool "team". Every node the tenants' agents made is ended after the test,
// and every Unix user the node program made for them (local nodes share this machine's /etc/passwd).
#include "local_run.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace ferry::test {

class pool_tenants : public local_nodes {
 protected:
  struct tenant {
    std::string name;
    std::unique_ptr<temp_dir> home;
    std::unique_ptr<local_node_guard> guard;      // the nodes its agent made for the pool
    std::unique_ptr<local_node_guard> own_guard;  // its private nodes (none should be made)
    std::filesystem::path project() const { return home->path() / "project"; }
  };

  void SetUp() override {
    local_nodes::SetUp();
    if (IsSkipped()) return;
    remove_tenant_users();  // an earlier run's, killed before its TearDown: each test makes its own
    ASSERT_TRUE(start_storage(true));
    for (const auto* name : {"ann", "bob", "cat"}) {
      tenant t{name, std::make_unique<temp_dir>(), nullptr, nullptr};
      t.guard = std::make_unique<local_node_guard>(t.home->path() / "state" / "ferry" / "pool" / "local");
      t.own_guard = std::make_unique<local_node_guard>(t.home->path() / "state" / "ferry" / "local");
      make_project(t);
      tenants_.push_back(std::move(t));
    }
    moto_->make_bucket("team");
  }

  void TearDown() override { end_nodes_and_users(); }

  // The tenant's project, made in SetUp.
  virtual void make_project(const tenant& t) = 0;

  // The environment a tenant's ferry runs in: its HOME, storage, its project, the pool and its name.
  process_options pool_env(const tenant& t) const {
    auto o = local_ferry_env(*moto_, t.home->path(), "s3://team/p", t.project());
    o.env["FERRY_POOL_NAME"] = "team";
    o.env["FERRY_POOL_TENANT"] = t.name;
    return o;
  }

  static std::string user_of(const tenant& t) { return "ferry-" + t.name; }

  // The tenant's user as /etc/passwd has it; empty when there is none.
  static std::string passwd_line(const std::string& user) {
    const auto r = run({"getent", "passwd", user});
    return r.exit_code == 0 ? r.out : std::string();
  }

  // Only users the node program made (its comment): never someone's own account of the same name.
  static void remove_tenant_users() {
    for (const auto* name : {"ann", "bob", "cat"}) {
      const auto user = std::string("ferry-") + name;
      if (contains(passwd_line(user), ":ferry tenant:")) run({"userdel", "--remove", "--force", user});
    }
  }

  // The nodes first: a user whose processes still run is not removed whole.
  void end_nodes_and_users() {
    for (auto& t : tenants_) {
      t.guard->cleanup();
      t.own_guard->cleanup();
    }
    remove_tenant_users();
  }

  std::vector<tenant> tenants_;
};

}  // namespace ferry::test
