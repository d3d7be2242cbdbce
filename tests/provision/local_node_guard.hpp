#pragma once
// Test helper: ends, at scope exit, every local node a test made, even when the test failed half-way:
// every machine recorded under a local provider's state dir, every machine handed to watch(), and any
// network namespace named after a node dir there. It uses stop_machine, then deletes by hand whatever
// namespace or veth is still there, so that a bug in stop_machine cannot leak into later tests.
#include "provision/local/machine.hpp"
#include "provision/node.hpp"
#include "tracing/action.hpp"
#include "tracing/sink.hpp"

#include "io_runner.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <boost/json/parse.hpp>

#include <chrono>
#include <filesystem>
#include <vector>

namespace ferry::test {

class local_node_guard {
 public:
  explicit local_node_guard(std::filesystem::path local_state_dir = {}) : state_dir_(std::move(local_state_dir)) {}
  local_node_guard(const local_node_guard&) = delete;
  local_node_guard& operator=(const local_node_guard&) = delete;
  ~local_node_guard() { cleanup(); }

  void watch(const provision::local::machine& m) { machines_.push_back(m); }

  void cleanup() {
    auto all = machines_;
    std::vector<std::string> netns;
    for (const auto& m : recorded(netns)) all.push_back(m);
    auto out = tracing::sink::discard();
    auto root = tracing::action::start_task(*out, "test:cleanup");
    for (const auto& m : all) {
      diagnostics ignored;
      run_io(provision::local::stop_machine(root, m, std::chrono::seconds(10), ignored));
      if (!m.netns.empty()) netns.push_back(m.netns);
      if (!m.veth.empty()) run({"ip", "link", "del", m.veth});
    }
    for (const auto& name : netns)
      if (std::filesystem::exists("/run/netns/" + name)) run({"ip", "netns", "del", name});
    machines_.clear();
  }

 private:
  // Machines recorded under the state dir; `netns` gets the namespace name of every node dir there.
  std::vector<provision::local::machine> recorded(std::vector<std::string>& netns) const {
    std::vector<provision::local::machine> out;
    std::error_code ec;
    if (state_dir_.empty()) return out;
    for (const auto& entry : std::filesystem::directory_iterator(state_dir_, ec)) {
      if (!entry.is_directory()) continue;
      netns.push_back("ferry-" + entry.path().filename().string());
      const auto text = read_file(entry.path() / "node.json");
      const auto doc = boost::json::parse(text, ec);
      if (ec || !doc.is_object()) continue;
      if (const auto* d = doc.get_object().if_contains("details"); d && d->is_object())
        out.push_back(provision::local::machine::from_json(d->get_object()));
    }
    return out;
  }

  std::filesystem::path state_dir_;
  std::vector<provision::local::machine> machines_;
};

}  // namespace ferry::test
