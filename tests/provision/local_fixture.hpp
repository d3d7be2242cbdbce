#pragma once
// Test fixture for local nodes: a state dir, a client key, a trace, readiness options with short
// intervals, and a guard that ends every node the test made even when it fails. Local nodes in network
// namespaces need root (CI runs as root); the fixture skips the test otherwise.
#include "provision/local/local_provider.hpp"
#include "provision/local/network.hpp"
#include "provision/readiness.hpp"

#include "io_runner.hpp"
#include "local_node_guard.hpp"
#include "openssh.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_root.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace ferry::test {

class local_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "local nodes in network namespaces need root";
  }

  // A failed test shows what each sshd said (its log and boot script), before the guard ends them.
  void TearDown() override {
    if (!HasFailure()) return;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir.path(), ec);
         it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      const auto name = it->path().filename();
      if (name == "sshd.log" || name == "boot.sh" || name == "mnt_ns")
        std::cerr << "---- " << it->path().string() << "\n" << read_file(it->path()) << "\n";
    }
  }

  provision::local::local_options options(provision::local::network_mode mode,
                                          std::chrono::milliseconds boot_delay = {}) const {
    provision::local::local_options o;
    o.state_dir = state / "local";
    o.public_key_line = key.public_line;
    o.network = mode;
    o.boot_delay = boot_delay;
    o.command_timeout = std::chrono::seconds(20);
    o.lock_timeout = std::chrono::seconds(10);
    return o;
  }

  provision::readiness_options ready_options(std::chrono::milliseconds timeout = std::chrono::seconds(20)) const {
    provision::readiness_options o;
    o.poll = {std::chrono::milliseconds(20), std::chrono::milliseconds(200), timeout};
    o.attempt_timeout = std::chrono::seconds(10);
    return o;
  }

  static std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::string::size_type start = 0;
    for (auto nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
      out.push_back(text.substr(start, nl - start));
      start = nl + 1;
    }
    if (start < text.size()) out.push_back(text.substr(start));
    return out;
  }

  static bool netns_exists(const std::string& name) { return std::filesystem::exists("/run/netns/" + name); }
  static bool link_exists(const std::string& name) { return std::filesystem::exists("/sys/class/net/" + name); }

  temp_dir dir;
  std::filesystem::path state = dir / "state";
  client_key key = make_client_key(dir.path());
  provision::login_check login = openssh_login(key.private_key);  // readiness's login: `ssh ... true`
  trace_root trace{dir / "trace.jsonl", "test:local"};
  local_node_guard guard{state / "local"};  // after dir: it runs before dir is removed
  diagnostics diag;
};

}  // namespace ferry::test
