// `ferry doctor --nodes` against a real local node (sshd in its own network namespace): the node passes, and
// once ferry's known_hosts holds another key for it, it fails naming the host key and the file.
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include "local_run.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sstream>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

class doctor_nodes_cli : public local_nodes {
 protected:
  doctor_nodes_cli() : local_nodes("doctor-nodes") {}

  void SetUp() override {
    local_nodes::SetUp();
    if (!moto_) return;
    options_ = env();
  }

  // The bucket's root as storage, run in HOME.
  process_options env() const override {
    auto o = local_ferry_env(*moto_, home_.path(), "s3://doctor-nodes", home_.path());
    for (const auto* name : {"FERRY_TASK_ID", "FERRY_SSH_IDENTITY_FILE", "FERRY_STORAGE_ENDPOINT"})
      o.unset_env.push_back(name);
    return o;
  }

  // The node check's entry of `ferry doctor --nodes --json`.
  json::object node_check(const std::string& id, int& exit_code) const {
    const auto r = run_ferry({"doctor", "--nodes", "--json"}, options_);
    exit_code = r.exit_code;
    const auto doc = json::parse(r.out).as_object();
    for (const auto& c : doc.at("checks").as_array())
      if (c.at("name").as_string() == "node:" + id) return c.as_object();
    ADD_FAILURE() << "no check of node " << id << " in " << r.out;
    return {};
  }

  process_options options_;
};

TEST_F(doctor_nodes_cli, a_node_passes_until_its_host_key_changes) {
  const auto up = run_ferry({"nodes", "up", "1"}, options_);
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  const auto registry = json::parse(read_file(home_ / "state" / "ferry" / "nodes.json"));
  const auto& nodes = registry.is_array() ? registry.as_array() : registry.at("nodes").as_array();
  ASSERT_EQ(nodes.size(), 1u);
  const std::string id(nodes.at(0).at("id").as_string());

  int code = -1;
  const auto good = node_check(id, code);
  EXPECT_EQ(code, 0) << json::serialize(good);
  EXPECT_EQ(good.at("status").as_string(), "passed") << json::serialize(good);
  EXPECT_TRUE(contains(std::string(good.at("detail").as_string()), "like ferry-node")) << json::serialize(good);
  EXPECT_TRUE(contains(std::string(good.at("detail").as_string()), "; python3 3.11.")) << json::serialize(good);

  // known_hosts now holds ferry's own public key for the node: the node's real host key no longer matches.
  const auto known_hosts = home_ / "config" / "ferry" / "known_hosts";
  std::istringstream pub(read_file(home_ / "config" / "ferry" / "id_ed25519.pub"));
  std::string type, blob;
  pub >> type >> blob;
  home_.write("config/ferry/known_hosts", fmt::format("{} {} {}\n", id, type, blob));
  fs::permissions(known_hosts, fs::perms::owner_read | fs::perms::owner_write);
  const auto bad = node_check(id, code);
  EXPECT_NE(code, 0);
  EXPECT_EQ(bad.at("status").as_string(), "failed") << json::serialize(bad);
  EXPECT_TRUE(contains(std::string(bad.at("detail").as_string()), "different host key")) << json::serialize(bad);
  EXPECT_TRUE(contains(std::string(bad.at("fix").as_string()), known_hosts.string())) << json::serialize(bad);

  EXPECT_EQ(run_ferry({"nodes", "down", "--all"}, options_).exit_code, 0);
}

TEST_F(doctor_nodes_cli, a_node_whose_python3_a_run_would_refuse_fails_its_check_naming_both) {
  // ferry packs with an interpreter that says it is 3.10; the node's python3 is this machine's 3.11.
  write_python_saying(home_ / "py310" / "python3", "3, 10, 12");
  options_.env["FERRY_PACKAGING_PYTHON"] = (home_ / "py310" / "python3").string();
  const auto up = run_ferry({"nodes", "up", "1"}, options_);
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  const auto registry = json::parse(read_file(home_ / "state" / "ferry" / "nodes.json"));
  const auto& nodes = registry.is_array() ? registry.as_array() : registry.at("nodes").as_array();
  const std::string id(nodes.at(0).at("id").as_string());
  int code = -1;
  const auto check = node_check(id, code);
  EXPECT_NE(code, 0);
  EXPECT_EQ(check.at("status").as_string(), "failed") << json::serialize(check);
  const std::string detail(check.at("detail").as_string());
  for (const auto* part : {"python3 is cpython 3.11.", "packed with cpython 3.10.12", "cannot load what was built for 3.10"})
    EXPECT_TRUE(contains(detail, part)) << part << " in " << detail;
  EXPECT_EQ(run_ferry({"nodes", "down", "--all"}, options_).exit_code, 0);
}

}  // namespace
}  // namespace ferry::test
