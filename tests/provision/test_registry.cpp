// The node registry: round trips, updates from concurrent processes, and damaged files.
#include "provision/error.hpp"
#include "provision/node_registry.hpp"

#include "io_runner.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_root.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

namespace ferry::provision {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::run_io;
using test::temp_dir;

node make_node(std::string id, std::string name = "node") {
  node n;
  n.id = std::move(id);
  n.provider = "local";
  n.name = std::move(name);
  n.host = "10.200.1.2";
  n.port = 22;
  n.user = "root";
  n.state = node_state::running;
  n.created_at = 1700000000;
  n.details = {{"pid", 42}, {"netns", "ferry-x"}};
  return n;
}

std::vector<std::string> ids(const std::vector<node>& nodes) {
  std::vector<std::string> out;
  for (const auto& n : nodes) out.push_back(n.id);
  return out;
}

class registry : public ::testing::Test {
 protected:
  temp_dir dir;
  test::trace_root trace{dir / "trace.jsonl", "test:registry"};
  node_registry reg{registry_file(dir / "state"), 2s};
  diagnostics diag;
};

TEST_F(registry, starts_empty_and_round_trips_every_field) {
  auto empty = reg.load(diag);
  ASSERT_TRUE(empty) << diag.message;
  EXPECT_TRUE(empty->empty());

  auto a = make_node("local-aaaaaa", "node-1");
  a.identity_file = "/keys/id";
  a.last_used_at = 1700000100;
  ASSERT_TRUE(run_io(reg.add(trace.root(), a, diag))) << diag.message;
  ASSERT_TRUE(run_io(reg.add(trace.root(), make_node("local-bbbbbb", "node-2"), diag))) << diag.message;

  auto loaded = reg.load(diag);
  ASSERT_TRUE(loaded) << diag.message;
  ASSERT_EQ(ids(*loaded), (std::vector<std::string>{"local-aaaaaa", "local-bbbbbb"}));
  EXPECT_EQ(to_json((*loaded)[0]), to_json(a));
  EXPECT_EQ(reg.file(), dir / "state" / "nodes.json");
  EXPECT_EQ(fs::status(reg.file()).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(registry, add_replaces_update_requires_and_remove_forgets) {
  ASSERT_TRUE(run_io(reg.add(trace.root(), make_node("a"), diag)));
  ASSERT_TRUE(run_io(reg.add(trace.root(), make_node("b"), diag)));
  auto changed = make_node("a", "renamed");
  ASSERT_TRUE(run_io(reg.add(trace.root(), changed, diag)));
  EXPECT_EQ(reg.load(diag)->size(), 2u);
  EXPECT_EQ(reg.load(diag)->front().name, "renamed");

  changed.state = node_state::terminated;
  ASSERT_TRUE(run_io(reg.update(trace.root(), changed, diag)));
  EXPECT_EQ(reg.load(diag)->front().state, node_state::terminated);

  auto missing = run_io(reg.update(trace.root(), make_node("zzz"), diag));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), errc::node_not_found);
  EXPECT_NE(diag.message.find("zzz"), std::string::npos) << diag.message;

  ASSERT_TRUE(run_io(reg.remove(trace.root(), "a", diag)));
  ASSERT_TRUE(run_io(reg.remove(trace.root(), "not-there", diag)));
  EXPECT_EQ(ids(*reg.load(diag)), (std::vector<std::string>{"b"}));
  // No temporary files are left beside it.
  for (const auto& e : fs::directory_iterator(dir / "state"))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST_F(registry, damaged_files_fail_with_bad_registry_naming_the_file) {
  fs::create_directories(reg.file().parent_path());
  for (const auto* text : {"{not json", "[]", R"({"version": 2, "nodes": []})", R"({"version": 1})",
                           R"({"version": 1, "nodes": [{"name": "no id"}]})", R"({"version": 1, "nodes": [3]})"}) {
    dir.write("state/nodes.json", text);
    diag.clear();
    auto loaded = reg.load(diag);
    ASSERT_FALSE(loaded) << text;
    EXPECT_EQ(loaded.error(), errc::bad_registry) << text;
    EXPECT_NE(diag.message.find(reg.file().string()), std::string::npos) << diag.message;
    // Changing it fails the same way, and leaves the file as it was.
    auto added = run_io(reg.add(trace.root(), make_node("a"), diag));
    ASSERT_FALSE(added);
    EXPECT_EQ(added.error(), errc::bad_registry);
    EXPECT_EQ(test::read_file(reg.file()), text);
  }
}

TEST_F(registry, a_held_lock_times_out_with_registry_busy) {
  node_registry quick(reg.file(), 200ms);
  fs::create_directories(reg.file().parent_path());
  const auto lock_path = fs::path(reg.file()).concat(".lock");
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // another open file description: conflicts even in this process
  const auto start = std::chrono::steady_clock::now();
  auto added = run_io(quick.add(trace.root(), make_node("a"), diag));
  const auto waited = std::chrono::steady_clock::now() - start;
  ::close(fd);
  ASSERT_FALSE(added);
  EXPECT_EQ(added.error(), errc::registry_busy);
  EXPECT_NE(diag.message.find(lock_path.string()), std::string::npos) << diag.message;
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 2s);
  ASSERT_TRUE(run_io(quick.add(trace.root(), make_node("a"), diag))) << diag.message;
}

// ---- changes within one process: group commit ----

boost::asio::awaitable<void> add_into(node_registry& reg, tracing::action& parent, node n, diagnostics& diag,
                                      result<void>& out) {
  out = co_await reg.add(parent, n, diag);
}

boost::asio::awaitable<void> update_into(node_registry& reg, tracing::action& parent, node n, diagnostics& diag,
                                         result<void>& out) {
  out = co_await reg.update(parent, n, diag);
}

// `count` adds (and an update of a node nobody added) started together on one io_context while another
// holder keeps the lock for `hold`: they queue, and the next write carries them all.
TEST_F(registry, changes_made_together_share_one_write_and_a_failed_one_leaves_the_rest) {
  constexpr int count = 50;
  fs::create_directories(reg.file().parent_path());
  const auto lock_path = fs::path(reg.file()).concat(".lock");
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  std::thread release([fd] {
    std::this_thread::sleep_for(300ms);
    ::close(fd);
  });
  std::vector<diagnostics> diags(count + 1);
  std::vector<result<void>> outcomes(count + 1);
  boost::asio::io_context io;
  for (int i = 0; i < count; ++i)
    boost::asio::co_spawn(io, add_into(reg, trace.root(), make_node(fmt::format("n{}", i)), diags[i], outcomes[i]),
                          boost::asio::detached);
  boost::asio::co_spawn(io, update_into(reg, trace.root(), make_node("nobody"), diags[count], outcomes[count]),
                        boost::asio::detached);
  io.run();
  release.join();
  for (int i = 0; i < count; ++i) EXPECT_TRUE(outcomes[i]) << diags[i].message;
  ASSERT_FALSE(outcomes[count]);
  EXPECT_EQ(outcomes[count].error(), errc::node_not_found);
  EXPECT_NE(diags[count].message.find("nobody"), std::string::npos) << diags[count].message;
  auto loaded = reg.load(diag);
  ASSERT_TRUE(loaded) << diag.message;
  EXPECT_EQ(loaded->size(), static_cast<std::size_t>(count));
  // Every add succeeded in a write that carried all of them.
  const auto text = trace.flushed_text();
  EXPECT_NE(text.find(fmt::format("\"batch\":{}", count)), std::string::npos) << text.substr(0, 2000);
}

// ---- concurrent writers, as separate processes ----

constexpr int writers = 4;
constexpr int adds_per_writer = 25;

// Not a test on its own: the body of each writer process that the test below starts (it re-runs this
// binary with a filter and FERRY_TEST_REGISTRY_WRITER set).
TEST(registry_writer, child) {
  const char* spec = std::getenv("FERRY_TEST_REGISTRY_WRITER");
  if (!spec) GTEST_SKIP() << "runs only as a writer process of registry.concurrent_writers_lose_nothing";
  const std::string s(spec);
  const auto bar = s.find('|');
  const std::string file = s.substr(0, bar);
  const std::string who = s.substr(bar + 1);
  temp_dir dir;
  test::trace_root trace{dir / "trace.jsonl", "test:registry_writer"};
  node_registry reg(file, 30s);
  for (int i = 0; i < adds_per_writer; ++i) {
    diagnostics diag;
    auto added = run_io(reg.add(trace.root(), make_node(fmt::format("{}-{}", who, i)), diag));
    ASSERT_TRUE(added) << diag.message;
    if (i % 5 == 4) {  // removes too, so that writers also take entries out under each other's feet
      auto removed = run_io(reg.remove(trace.root(), fmt::format("{}-{}", who, i), diag));
      ASSERT_TRUE(removed) << diag.message;
    }
  }
}

TEST_F(registry, concurrent_writers_lose_nothing) {
  const auto self = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::unique_ptr<test::child>> children;
  for (int w = 0; w < writers; ++w) {
    test::process_options o;
    o.env["FERRY_TEST_REGISTRY_WRITER"] = fmt::format("{}|w{}", reg.file().string(), w);
    children.push_back(test::spawn({self, "--gtest_filter=registry_writer.child"}, o));
  }
  for (auto& c : children) {
    const auto r = c->wait();
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  auto loaded = reg.load(diag);
  ASSERT_TRUE(loaded) << diag.message;
  std::set<std::string> expected;
  for (int w = 0; w < writers; ++w)
    for (int i = 0; i < adds_per_writer; ++i)
      if (i % 5 != 4) expected.insert(fmt::format("w{}-{}", w, i));
  const auto got = ids(*loaded);
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), expected);
  EXPECT_EQ(got.size(), expected.size());  // no duplicates either
}

}  // namespace
}  // namespace ferry::provision
