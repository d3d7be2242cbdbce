// A map ends when its work ends, on local nodes against moto_server. A `ferry run --nodes 2` stores every
// layer of a venv's site-packages and leaves 2 warm nodes; then a map of short tasks on those 2 and 2 new
// ones, as a fan-out (one seed, the rest its children), behind a slow link to storage, with enough tasks
// that the new nodes join while tasks still wait. The tasks import the workspace and one small package; a
// large package no task imports sits in the site-packages.
//
// What the trace must show, in order (never in seconds):
// - a child that asked its parent for a layer the parent had in its cache (and so never copied) was
//   refused before the parent's materialise ended (it used to be held for nodes.fanout_wait, and the
//   children started long after the last task);
// - the large layer never landed on a node during the map: the map ended first;
// - the job said its work was over.
#include "support/fault_proxy.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/random_bytes.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include "local_run.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <memory>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

class map_ends : public local_nodes {
 protected:
  map_ends() : local_nodes("ferry-ends") {}

  void SetUp() override {
    local_nodes::SetUp();
    if (!moto_) return;
    std::string why;
    const auto site_dir = make_venv(project() / ".venv", why);
    ASSERT_FALSE(site_dir.empty()) << why;
    write_file(site_dir / "tinyconf" / "__init__.py", "SCALE = 3\n");
    // What the interpreter holds besides: packages no task imports, one of them large.
    for (int i = 0; i < 6; ++i)
      write_file(site_dir / fmt::format("unused{}", i) / "__init__.py", fmt::format("N = {}\n", i));
    write_file(site_dir / "bigpkg" / "__init__.py", "raise SystemExit('no task imports bigpkg')\n");
    write_file(site_dir / "bigpkg" / "blob.bin", random_bytes(big_bytes, 7));
    write_file(project() / ".gitignore", ".venv/\n");
    write_file(project() / "ferry.toml", "[packaging]\npython = \".venv/bin/python\"\n");
    write_file(project() / "mypkg" / "__init__.py", "def double(x):\n    return 2 * x\n");
    write_file(project() / "task.py",
               "import sys, mypkg, tinyconf\nprint(mypkg.double(int(sys.argv[1])) * tinyconf.SCALE)\n");
  }

  process_options env() const override {
    auto o = local_nodes::env();
    // 4 nodes fan out from one seed; a child waits long for a copy its parent does not have, so that a
    // wait for one would outlast the large layer's download.
    o.env["FERRY_NODES_FANOUT_MIN"] = "2";
    o.env["FERRY_NODES_FANOUT_SEEDS"] = "1";
    o.env["FERRY_NODES_FANOUT_DEGREE"] = "3";
    o.env["FERRY_NODES_FANOUT_WAIT"] = "90s";
    // The map stays on its 4 nodes: the sizer would grow it when new nodes start fast (a node start of
    // about 1 s against 80 tasks waiting), and the test looks at the fan-out of these 4.
    o.env["FERRY_NODES_MAX_NODES"] = "4";
    return o;
  }

  static constexpr std::size_t big_bytes = 24u << 20;
};

TEST_F(map_ends, a_map_on_warm_and_new_nodes_ends_without_waiting_for_layers_no_task_imported) {
  const auto first = run_ferry({"run", "--nodes", "2", "--", "python3", "task.py", "1"}, env());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_TRUE(contains(first.out, "6")) << first.out;

  // The large layer takes about 100 s behind this link: the map's short tasks are over long before.
  fault_proxy proxy("10.200.0.1", moto_->port(), "10.200.0.1");
  proxy.set_rate(256 << 10);
  const auto trace = home_ / "map.jsonl";
  // One task at a time per node, enough of them that the new nodes join while tasks still wait.
  const auto map = run_ferry({"--trace", trace.string(), "map", "--nodes", "4", "--concurrency", "1", "--range",
                              "1..120", "--", "python3", "task.py", "{}"},
                             env_through(proxy.endpoint()));
  ASSERT_EQ(map.exit_code, 0) << map.err;
  EXPECT_TRUE(contains(map.err, "120 done")) << map.err;
  EXPECT_TRUE(contains(map.err, "(2 new, 2 warm)")) << map.err;
  EXPECT_TRUE(contains(map.err, "last task ended at")) << map.err;
  EXPECT_TRUE(contains(map.err, "after the work")) << map.err;

  double last_task_end = 0;
  bool work_over = false;
  {
    std::map<std::string, std::string> started;  // action key -> type
    for (const auto& o : trace_file_lines(trace)) {
      const auto status = trace_text(o, "action_status");
      if (status == "started") started[trace_action_key(o)] = trace_text(o, "action_type");
      if ((status == "succeeded" || status == "failed") &&
          started[trace_action_key(o)] == action_types::agent::task)
        last_task_end = std::max(last_task_end, o.at("timestamp").as_double());
      if (trace_type(o) == action_types::agent::work_over) work_over = true;
    }
  }
  ASSERT_GT(last_task_end, 0) << "no task in the trace";
  EXPECT_TRUE(work_over) << "the job never said its work was over";

  // Which node serves at which address (the agent's ferry:serve actions), and per node program file: whose
  // it is, when its materialise ended, and which layers it found in its cache.
  std::map<std::string, std::string> node_at;  // bind address -> node id
  for (const auto& o : trace_file_lines(trace))
    if (trace_type(o) == action_types::agent::serve && trace_text(o, "action_status") == "started")
      node_at[trace_text(o, "bind")] = trace_text(o, "node");
  struct node_file {
    std::string node;
    std::vector<json::object> lines;
    double materialise_end = -1;
    std::set<std::string> cached;  // layer ids
  };
  std::vector<node_file> files;
  const auto stem = trace.stem().string() + ".node-";
  for (const auto& e : fs::directory_iterator(trace.parent_path())) {
    const auto name = e.path().filename().string();
    if (!name.starts_with(stem)) continue;
    node_file f;
    f.node = name.substr(stem.size(), name.rfind('-') - stem.size());
    f.lines = trace_file_lines(e.path());
    std::map<std::string, std::string> layer_of;  // layer action key -> id
    for (const auto& o : f.lines) {
      const auto type = trace_type(o);
      const auto status = trace_text(o, "action_status");
      if (type == action_types::node::materialise && status != "started" && !status.empty())
        f.materialise_end = o.at("timestamp").as_double();
      if (type == action_types::node::layer && status == "started") layer_of[trace_action_key(o)] = trace_text(o, "layer");
      const auto* cached = o.if_contains("cached");
      if (type == action_types::node::layer && status == "succeeded" && cached && cached->is_bool() && cached->as_bool())
        f.cached.insert(layer_of[trace_action_key(o)]);
    }
    files.push_back(std::move(f));
  }
  ASSERT_FALSE(files.empty());
  auto materialise_of = [&](const std::string& node) -> const node_file* {
    for (const auto& f : files)
      if (f.node == node && f.materialise_end >= 0) return &f;
    return nullptr;
  };

  std::size_t may_starts = 0, peers = 0, refusals_checked = 0;
  for (const auto& f : files) {
    std::map<std::string, std::string> layer_names;  // layer action key -> layer name
    struct shard_start {
      std::string source, layer;
      double at = 0;
    };
    std::map<std::string, shard_start> shards;  // shard action key -> where and what it asked
    for (const auto& o : f.lines) {
      const auto type = trace_type(o);
      const auto at = o.at("timestamp").as_double();
      const auto status = trace_text(o, "action_status");
      if (type == action_types::node::peer) ++peers;
      if (type == action_types::node::may_start) ++may_starts;
      if (type == action_types::node::layer && status == "started") layer_names[trace_action_key(o)] = trace_text(o, "name");
      if (type == action_types::node::layer && status == "succeeded") {
        const auto* cached = o.if_contains("cached");
        const bool fetched = cached && cached->is_bool() && !cached->as_bool();
        EXPECT_FALSE(fetched && layer_names[trace_action_key(o)] == "bigpkg")
            << "the layer no task imported landed during the map: the map waited for it";
      }
      if (type == action_types::node::shard && status == "started")
        shards[trace_action_key(o)] = {trace_text(o, "source"), trace_text(o, "layer"), at};
      if (type != action_types::node::shard || status != "failed" || trace_text(o, "reason") == "cancelled") continue;
      // A peer asked for a layer it had in its cache, while its materialise still ran, refuses before that
      // ends: it made no copy and never will. (It used to hold the request for nodes.fanout_wait.)
      const auto& asked = shards[trace_action_key(o)];
      if (!asked.source.starts_with("http://")) continue;
      const auto host = asked.source.substr(7, asked.source.rfind(':') - 7);
      const auto* parent = materialise_of(node_at[host]);
      if (!parent || !parent->cached.count(asked.layer) || asked.at >= parent->materialise_end) continue;
      ++refusals_checked;
      EXPECT_LT(at, parent->materialise_end)
          << "a peer held a request for a layer it had cached until its own materialise had ended: "
          << trace_text(o, "reason");
    }
  }
  EXPECT_GE(refusals_checked, 1u) << "no child asked its parent for a layer the parent had cached";
  EXPECT_GE(may_starts, 1u);
  EXPECT_GE(peers, 1u) << "no node had a parent to fetch from: the fan-out this test is about never happened";
}

}  // namespace
}  // namespace ferry::test
