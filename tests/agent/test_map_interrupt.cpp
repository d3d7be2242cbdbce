// Ctrl-C while a map's node is still being set up, on a local node against moto_server. The node is a
// warm one (`ferry nodes up` made it); the map's set-up of it records its use in the node registry, and
// the test holds the registry's lock, so the set-up waits there until the signal comes: the phase is held
// open by the test, and read from ferry's own trace, never guessed from a sleep. A node whose set-up was
// cancelled must not be handed over: no task starts, ferry ends with its error line, exits 130, and every
// action of its trace ends.
#include "support/eliot.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include "local_run.hpp"

#include <boost/asio/error.hpp>
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <poll.h>
#include <sys/file.h>
#include <unistd.h>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// A trace file read as ferry writes it: whole lines only, from where the last look stopped.
class trace_follower {
 public:
  explicit trace_follower(fs::path file) : file_(std::move(file)) {}

  // Waits until a line for which `match` holds has been written; false after the bound without one.
  template <class Match>
  bool wait_for(Match match) {
    for (int i = 0; i < bound_polls; ++i) {
      std::ifstream in(file_, std::ios::binary);
      in.seekg(static_cast<std::streamoff>(read_));
      std::string text((std::istreambuf_iterator<char>(in)), {});
      for (auto nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n')) {
        const auto line = text.substr(0, nl);
        text.erase(0, nl + 1);
        read_ += nl + 1;
        json::error_code ec;
        const auto v = json::parse(line, ec);
        if (!ec && v.is_object() && match(v.get_object())) return true;
      }
      ::poll(nullptr, 0, poll_ms);
    }
    return false;
  }

 private:
  static constexpr int poll_ms = 20;
  static constexpr int bound_polls = 9000;  // 3 minutes: the pack of this small project is far shorter
  fs::path file_;
  std::size_t read_ = 0;
};

bool is_action(const json::object& o, std::string_view type, std::string_view status) {
  const auto* t = o.if_contains("action_type");
  const auto* s = o.if_contains("action_status");
  return t && s && t->as_string() == type && s->as_string() == status;
}

class map_interrupt : public local_nodes {
 protected:
  map_interrupt() : local_nodes("ferry-run") {}

  void SetUp() override {
    local_nodes::SetUp();
    if (!moto_) return;
    write_file(project() / "data.txt", "what the map ships\n");
  }

  void TearDown() override {
    if (lock_fd_ >= 0) ::close(lock_fd_);
    local_nodes::TearDown();
  }

  // Takes the node registry's lock, as another ferry command writing it would.
  void hold_registry_lock() {
    const auto lock = home_ / "state" / "ferry" / "nodes.json.lock";
    lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(lock_fd_, 0) << lock;
    ASSERT_EQ(::flock(lock_fd_, LOCK_EX), 0);
  }
  void release_registry_lock() {
    ::close(lock_fd_);
    lock_fd_ = -1;
  }

  int lock_fd_ = -1;
};

TEST_F(map_interrupt, ctrl_c_while_a_node_is_set_up_hands_it_over_to_no_task) {
  auto o = env();
  const auto up = run_ferry({"nodes", "up", "1"}, o);
  ASSERT_EQ(up.exit_code, 0) << up.err;
  ASSERT_TRUE(fs::exists(home_ / "state" / "ferry" / "nodes.json"));
  hold_registry_lock();

  const auto trace = home_ / "map.jsonl";
  auto child = spawn_ferry({"--trace", trace.string(), "map", "--nodes", "1", "--range", "1..40", "--concurrency",
                            "2", "--", "sh", "-c", "echo task $1", "_", "{}"},
                           o);
  trace_follower follow(trace);
  // The warm node's set-up records its use in the registry, and waits for the lock the test holds.
  const bool waiting = follow.wait_for([](const json::object& m) {
    return is_action(m, action_types::registry::update, "started");
  });
  if (!waiting) {
    child->signal(SIGKILL);
    FAIL() << "the map never came to record its node's use: " << child->wait().err;
  }
  child->signal(SIGINT);
  // The cancelled wait ends; only then can the registry be written again, by whatever ferry does next.
  const bool ended = follow.wait_for([](const json::object& m) {
    return is_action(m, action_types::registry::update, "failed") ||
           is_action(m, action_types::registry::update, "succeeded");
  });
  release_registry_lock();
  const auto r = child->wait();
  ASSERT_TRUE(ended) << r.err;

  EXPECT_EQ(r.exit_code, 130) << r.err;
  // The line every command ends with when Ctrl-C stopped it, after the map's count of what finished.
  EXPECT_TRUE(r.err.ends_with("ferry: map: interrupted: 40 tasks: 0 done, 0 failed, 0 cut short, 40 not run\n"
                              "ferry: interrupted\n"))
      << r.err;
  EXPECT_FALSE(contains(r.err, boost::system::error_code(boost::asio::error::operation_aborted).message())) << r.err;
  EXPECT_EQ(r.out, "") << "a task ran after the signal";

  // The node's set-up ended as cancelled and nothing began on it: no environment, no task, here or on the
  // node; and eliot rebuilds every action of ferry's trace as ended.
  const auto log = read_file(trace);
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    json::error_code ec;
    const auto v = json::parse(line, ec);
    if (ec || !v.is_object()) continue;
    EXPECT_FALSE(is_action(v.get_object(), action_types::provision::node, "succeeded")) << "handed over: " << line;
    EXPECT_FALSE(is_action(v.get_object(), action_types::agent::materialise, "started")) << "set to work: " << line;
  }
  EXPECT_FALSE(contains(log, std::string("\"action_type\":\"") + std::string(action_types::agent::task) + "\""))
      << "a task started after the signal";
  const auto tasks = eliot_parse({trace});
  ASSERT_FALSE(tasks.empty());
  for (const auto& t : tasks) {
    EXPECT_TRUE(t.at("complete").as_bool()) << json::serialize(t);
    for (const auto& line : flatten(t.at("root"))) EXPECT_FALSE(contains(line, ":started")) << "never ended: " << line;
  }
  for (const auto& m : node_lines(trace))
    EXPECT_FALSE(is_action(m, action_types::agent::task, "started")) << json::serialize(m);

  // The views count what Ctrl-C cut short as cancelled, never as failed: stats, and the timeline's bars.
  const auto stats = run_ferry({"trace", "stats", "--json", trace.string()}, o);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const auto v = json::parse(stats.out);
  std::int64_t failures = 0, cancelled = 0;
  for (const auto& t : v.at("action_types").as_array()) {
    failures += t.at("failures").as_int64();
    cancelled += t.at("cancelled").as_int64();
  }
  EXPECT_EQ(failures, 0) << stats.out;
  EXPECT_GE(cancelled, 2) << stats.out;  // at least the registry's update and the map
  EXPECT_EQ(v.at("jobs").at(0).at("status"), "cancelled") << stats.out;
  const auto page = home_ / "timeline.html";
  const auto html = run_ferry({"trace", "html", trace.string(), "-o", page.string()}, o);
  ASSERT_EQ(html.exit_code, 0) << html.err;
  const auto text = read_file(page);
  const auto begin = text.find(R"(id="ferry-data">)") + 16;
  const auto data = json::parse(text.substr(begin, text.find("</script>", begin) - begin));
  std::map<std::int64_t, int> bars;
  for (const auto& b : data.at("spans").as_array()) ++bars[b.as_array()[4].as_int64()];
  EXPECT_EQ(bars[1], 0) << "a red bar for a cancellation";
  EXPECT_GE(bars[3], 2);
  if (HasFailure()) std::cerr << "ferry's trace:\n" << log;
}

// Ctrl-C in the middle of a map's tasks: one task done, one failed, one running, three waiting. The map
// says so before it says `interrupted`, and each task that began has its line.
TEST_F(map_interrupt, ctrl_c_mid_map_says_what_finished_and_what_did_not) {
  auto o = env();
  o.env["FERRY_NODES_MAX_NODES"] = "1";  // one node, one task at a time: the tasks go in order
  const auto trace = home_ / "map.jsonl";
  auto child = spawn_ferry({"--trace", trace.string(), "map", "--nodes", "1", "--range", "1..6", "--concurrency",
                            "1", "--retries", "0", "--", "sh", "-c",
                            "case $1 in 1) echo one;; 2) exit 3;; *) sleep 600;; esac", "_", "{}"},
                           o);
  trace_follower follow(trace);
  // The third task has begun, so the first two have ended (one at a time, in order, on the one node).
  const bool third = follow.wait_for([](const json::object& m) {
    const auto* input = m.if_contains("input");
    return is_action(m, action_types::agent::task, "started") && input && input->is_string() &&
           input->as_string() == "3";
  });
  if (!third) {
    child->signal(SIGKILL);
    FAIL() << "the third task never began: " << child->wait().err;
  }
  child->signal(SIGINT);
  const auto r = child->wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_TRUE(r.err.ends_with("ferry: map: interrupted: 6 tasks: 1 done, 1 failed, 1 cut short, 3 not run\n"
                              "ferry: interrupted\n"))
      << r.err;
  // A line for each task that began, with its seconds a plain decimal.
  std::istringstream lines(r.out);
  std::vector<json::object> results;
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("\"seconds\":");
    ASSERT_NE(at, std::string::npos) << line;
    const auto number = line.substr(at + 10, line.find_first_of(",}", at) - at - 10);
    EXPECT_EQ(number.find_first_not_of("0123456789."), std::string::npos) << line;
    results.push_back(json::parse(line).as_object());
  }
  ASSERT_EQ(results.size(), 3u) << r.out;
  EXPECT_EQ(results[0].at("input").as_string(), "1");
  EXPECT_TRUE(results[0].at("ok").as_bool());
  EXPECT_EQ(results[1].at("exit_code").as_int64(), 3);
  EXPECT_EQ(results[2].at("input").as_string(), "3");
  EXPECT_EQ(results[2].at("error").as_string(), "interrupted");
  EXPECT_FALSE(results[2].at("ok").as_bool());
}

}  // namespace
}  // namespace ferry::test
