#pragma once
// A test harness for the ec2 provider against moto_server: moto's instances become real nodes.
#include "provision/local/machine.hpp"
#include "support/moto.hpp"
#include "tracing/sink.hpp"

#include "../provision/io_runner.hpp"
#include "../provision/local_node_guard.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <thread>

namespace ferry::test {

// moto's instances become real nodes: for each running instance with a private address, after a delay
// like a booting VM's, a real sshd in a network namespace at that address, authorizing ferry's key.
class instance_harness {
 public:
  instance_harness(const moto_server& moto, std::filesystem::path dir, std::string public_key)
      : moto_(moto), dir_(std::move(dir)), public_key_(std::move(public_key)), thread_([this] { loop(); }) {}
  ~instance_harness() {
    stop_ = true;
    thread_.join();
  }
  int started() const { return started_; }
  local_node_guard& guard() { return guard_; }

 private:
  void loop() {
    auto out = tracing::sink::discard();
    auto root = tracing::action::start_task(*out, "test:harness");
    std::set<std::string> seen;
    while (!stop_) {
      const auto r = moto_.aws({"ec2", "describe-instances", "--filters", "Name=instance-state-name,Values=running",
                                "--query", "Reservations[].Instances[].[InstanceId,PrivateIpAddress]",
                                "--output", "text"});
      std::istringstream lines(r.out);
      std::string id, ip;
      while (lines >> id >> ip) {
        if (!seen.insert(id).second) continue;
        provision::local::machine_spec spec;
        spec.id = "h" + id.substr(id.size() - 8);
        spec.dir = dir_ / id;
        spec.address = ip;
        spec.authorized_key = public_key_;
        spec.boot_delay = std::chrono::milliseconds(1500);
        diagnostics diag;
        auto m = run_io(provision::local::start_machine(root, spec, diag));
        if (m) {
          guard_.watch(*m);
          ++started_;
        } else {
          ADD_FAILURE() << "harness: " << diag.message;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  const moto_server& moto_;
  std::filesystem::path dir_;
  std::string public_key_;
  local_node_guard guard_;
  std::atomic<bool> stop_{false};
  std::atomic<int> started_{0};
  std::thread thread_;
};


// A VPC on 10.200.0.0/16 with one subnet, made through moto's own API, and the environment that points
// ferry's ec2 provider at it. The id is empty (and the test failed) when moto refused either.
inline std::string make_ec2_subnet(const moto_server& moto) {
  const auto first_line = [](const std::string& s) { return s.substr(0, s.find('\n')); };
  const auto vpc = moto.aws({"ec2", "create-vpc", "--cidr-block", "10.200.0.0/16", "--query", "Vpc.VpcId",
                             "--output", "text"});
  EXPECT_EQ(vpc.exit_code, 0) << vpc.err;
  if (vpc.exit_code != 0) return {};
  const auto subnet = moto.aws({"ec2", "create-subnet", "--vpc-id", first_line(vpc.out), "--cidr-block",
                                "10.200.250.0/24", "--query", "Subnet.SubnetId", "--output", "text"});
  EXPECT_EQ(subnet.exit_code, 0) << subnet.err;
  return subnet.exit_code == 0 ? first_line(subnet.out) : std::string();
}

inline void use_ec2_provider(std::map<std::string, std::string>& env, const std::string& subnet_id) {
  env["FERRY_PROVIDER"] = "ec2";
  env["FERRY_EC2_AMI"] = "ami-12c6146b";
  env["FERRY_EC2_SUBNET_ID"] = subnet_id;
  env["FERRY_EC2_INSTANCE_TYPE"] = "t3.micro";
  env["FERRY_EC2_USER"] = "root";
  // The harness's instances are sshd on this very machine: their idle watchdog would shut it down.
  env["FERRY_NODES_IDLE_TIMEOUT"] = "0";
}

}  // namespace ferry::test
