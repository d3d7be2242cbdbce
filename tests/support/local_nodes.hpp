#pragma once
// The workstation of the end-to-end tests that run the ferry binary with local nodes (sshd in network
// namespaces on the bridge ferry0): the root check, a HOME of their own for ferry's config, state and
// cache, storage on the bridge's address, the environment ferry runs in, and the end of every node.
//
// Header-only: making the bridge and ending nodes takes ferry's provision library, which the test binaries
// that bring up nodes link and the test support library does not.
#include "provision/local/network.hpp"
#include "tracing/action.hpp"
#include "tracing/sink.hpp"

#include "../provision/io_runner.hpp"
#include "../provision/local_node_guard.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

namespace ferry::test {

// How the end-to-end tests run ferry: its config, state and cache under `home` (which is HOME too), no
// ssh agent, nodes allowed a minute to come up.
inline process_options local_ferry_env(const std::filesystem::path& home) {
  process_options o;
  use_home(o, home);
  o.env["FERRY_NODES_READY_TIMEOUT"] = "60s";
  o.unset_env.push_back("SSH_AUTH_SOCK");
  return o;
}

// The same, against `moto` (storage.url `storage_url`), in `cwd`.
inline process_options local_ferry_env(const moto_server& moto, const std::filesystem::path& home,
                                       const std::string& storage_url, const std::filesystem::path& cwd) {
  auto o = local_ferry_env(home);
  for (const auto& [k, v] : moto.process_env().env) o.env.try_emplace(k, v);
  for (const auto& k : moto.process_env().unset_env) o.unset_env.push_back(k);
  o.env["FERRY_STORAGE_URL"] = storage_url;
  o.cwd = cwd;
  return o;
}

// The nodes' bridge, which must exist before moto_server can listen on its address (the first local node
// would make it too).
inline bool bridge_up() {
  auto out = tracing::sink::discard();
  auto root = tracing::action::start_task(*out, "test:bridge");
  diagnostics diag;
  auto r = run_io(provision::local::ensure_bridge(root, std::chrono::seconds(30), diag));
  if (!r) ADD_FAILURE() << diag.message;
  return static_cast<bool>(r);
}

// Local nodes live in network namespaces, which take root (CI runs as root); a test skips without it.
inline bool can_make_local_nodes() { return ::geteuid() == 0; }
inline constexpr const char* local_nodes_need_root = "local nodes in network namespaces need root (CI runs as root)";

// The workstation ferry runs on: HOME is a fresh directory (home_), and every local node recorded under it is
// ended when the workstation goes, even after a test that failed half-way. With a bucket, storage too
// (start_storage): moto_server on the bridge's address, where nodes reach it, holding that bucket; ferry is
// pointed at s3://BUCKET/p and runs in project().
class local_workstation {
 public:
  explicit local_workstation(std::string bucket = {}) : bucket_(std::move(bucket)) {}
  virtual ~local_workstation() = default;
  local_workstation(const local_workstation&) = delete;
  local_workstation& operator=(const local_workstation&) = delete;

  // The bridge, then moto_ on its address with the bucket; false (with a failure added) without a bridge.
  // `serial`: moto answers one request at a time (moto_options::serial), for tests of racing conditional
  // writes.
  bool start_storage(bool serial = false) {
    if (!bridge_up()) return false;
    moto_.emplace(moto_options{.host = std::string(provision::local::bridge_address), .serial = serial});
    if (!bucket_.empty()) moto_->make_bucket(bucket_);
    return true;
  }

  // `ferry nodes down --all`, once storage was started.
  void nodes_down() const {
    if (moto_) run_ferry({"nodes", "down", "--all"}, env());
  }

  const std::string& bucket() const { return bucket_; }
  std::filesystem::path project() const { return home_ / "project"; }

  // The environment ferry runs in (local_ferry_env); with storage, against moto_ in project().
  virtual process_options env() const {
    if (!moto_) return local_ferry_env(home_.path());
    return local_ferry_env(*moto_, home_.path(), "s3://" + bucket_ + "/p", project());
  }

  // env(), with storage reached through `endpoint` (a proxy in front of moto_).
  process_options env_through(const std::string& endpoint) const {
    auto o = env();
    o.env["AWS_ENDPOINT_URL"] = endpoint;
    return o;
  }

  temp_dir home_;
  local_node_guard guard_{home_ / "state" / "ferry" / "local"};
  std::optional<moto_server> moto_;

 private:
  std::string bucket_;
};

// A test of ferry on local nodes, on a workstation of its own: skipped unless it runs as root (CI does);
// given a bucket, with storage, and the nodes taken down after the test. A derived SetUp calls
// local_nodes::SetUp() first and goes on only when moto_ then holds a server (it does not when the test
// was skipped or the bridge failed).
class local_nodes : public ::testing::Test, public local_workstation {
 protected:
  explicit local_nodes(std::string bucket = {}) : local_workstation(std::move(bucket)) {}

  void SetUp() override {
    if (!can_make_local_nodes()) GTEST_SKIP() << local_nodes_need_root;
    if (bucket().empty()) return;
    ASSERT_TRUE(start_storage());
  }
  void TearDown() override { nodes_down(); }
};

}  // namespace ferry::test
