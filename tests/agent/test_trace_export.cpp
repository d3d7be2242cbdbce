// The trace exports of real jobs on local nodes: `ferry trace otlp` of a `ferry run --nodes 2` whose
// Python program (python3-eliot) continues the task in a file of its own, and of a `ferry map` on 2 nodes,
// read back by the independent decoder (protobufjs with the OTLP protos, tests/peers/otlp_decode); and
// `ferry trace chrome` of a `ferry map` on 4 nodes, whose events Perfetto must be able to draw: on each
// track, no two overlap without nesting. One set of 4 nodes serves every test (nodes are the slow part).
#include "support/venv_closure.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include "../tracing/otlp_decoder.hpp"
#include "local_run.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <set>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// Storage, a project and 4 warm local nodes, made once for the suite.
struct nodes_and_storage : local_workstation {
  nodes_and_storage() : local_workstation("ferry-otlp") {}

  process_options env() const override {
    auto o = local_workstation::env();
    o.env["FERRY_NODES_MAX_NODES"] = "4";  // the warm ones: a map makes no more
    return o;
  }

  // A project whose Python (a venv with eliot alone, linked from Debian's, so that little ships) runs
  // traced.py: it continues ferry's task with eliot, in a file of its own under $FERRY_TRACE_DIR, as
  // examples/project/train.py does. The nodes' own dist-packages are hidden from it.
  std::string make() {
    if (!start_storage()) return "the bridge for local nodes could not be made";
    write_file(project() / ".gitignore", ".venv/\n");
    write_file(project() / "ferry.toml", "[packaging]\npython = \".venv/bin/python\"\n");
    write_file(project() / "traced.py",
               "import os, eliot\n"
               "path = os.path.join(os.environ['FERRY_TRACE_DIR'], f'child-{os.getpid()}.jsonl')\n"
               "eliot.to_file(open(path, 'a'))\n"
               "with eliot.Action.continue_task(task_id=os.environ['FERRY_TASK_ID']):\n"
               "    with eliot.start_action(action_type='user:work', pid=os.getpid()):\n"
               "        eliot.log_message(message_type='user:hello')\n"
               "        with eliot.start_action(action_type='user:step'):\n"
               "            pass\n");
    const auto venv = run({system_python, "-m", "venv", "--without-pip", (project() / ".venv").string()});
    if (venv.exit_code != 0) return "venv: " + venv.err;
    const auto site = run({(project() / ".venv" / "bin" / "python").string(), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"});
    const auto closure = run({system_python, "-c", closure_script("eliot")});
    if (site.exit_code != 0 || closure.exit_code != 0) return "eliot for the venv: " + site.err + closure.err;
    if (link_closure(closure.out, site.out.substr(0, site.out.find('\n'))) == 0) return "no eliot to link";
    const auto up = run_ferry({"nodes", "up", "4"}, env());
    if (up.exit_code != 0) return "nodes up 4: " + up.err;
    return {};
  }
};

class trace_export : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!can_make_local_nodes() || !bridge_up()) return;
    suite_ = std::make_unique<nodes_and_storage>();
    why_not_ready_ = suite_->make();
  }
  static void TearDownTestSuite() {
    if (suite_) suite_->nodes_down();
    suite_.reset();
  }
  void SetUp() override {
    if (!can_make_local_nodes()) GTEST_SKIP() << local_nodes_need_root;
    ASSERT_TRUE(suite_) << "the bridge for local nodes could not be made";
    ASSERT_EQ(why_not_ready_, "");
  }

  static const nodes_and_storage& s() { return *suite_; }

  static std::unique_ptr<nodes_and_storage> suite_;
  static std::string why_not_ready_;
};

std::unique_ptr<nodes_and_storage> trace_export::suite_;
std::string trace_export::why_not_ready_;


// Actions in the trace files, counted by their start messages: ferry's file, the node program's files
// beside it, and any others given.
std::size_t actions_in(const fs::path& trace, const std::vector<fs::path>& others = {}) {
  auto lines = trace_file_lines(trace);
  for (auto& m : node_lines(trace)) lines.push_back(std::move(m));
  for (const auto& f : others)
    for (auto& m : trace_file_lines(f)) lines.push_back(std::move(m));
  return static_cast<std::size_t>(std::count_if(lines.begin(), lines.end(), [](const json::object& m) {
    const auto* status = m.if_contains("action_status");
    return status && status->as_string() == "started";
  }));
}

// The nodes a job had: each gets the job's layers (whether a task then lands on it is up to timing).
std::set<std::string> job_nodes(const fs::path& trace) {
  std::set<std::string> out;
  for (const auto& m : trace_file_lines(trace))
    if (m.contains("action_type") && m.at("action_type").as_string() == action_types::agent::materialise &&
        m.at("action_status").as_string() == "started")
      out.insert(std::string(m.at("node").as_string()));
  return out;
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

// The decoder's spans by span id.
std::map<std::string, json::object> by_span_id(const json::object& summary) {
  std::map<std::string, json::object> out;
  for (const auto& s : summary.at("spans").as_array()) out[std::string(s.at("spanId").as_string())] = s.as_object();
  return out;
}

// The spans from `span` up to its root (the last), as far as parents resolve.
std::vector<json::object> chain_up(const std::map<std::string, json::object>& spans, json::object span) {
  std::vector<json::object> chain{span};
  while (!chain.back().at("parentSpanId").as_string().empty() && chain.size() <= spans.size()) {
    const auto it = spans.find(std::string(chain.back().at("parentSpanId").as_string()));
    if (it == spans.end()) break;
    chain.push_back(it->second);
  }
  return chain;
}

// What every export of one job shows: each span's parent is the span one level up (ferry.task_level), and
// every chain of parents ends at the one root, the job.
void expect_one_tree(const std::map<std::string, json::object>& spans, std::string_view job) {
  std::size_t roots = 0;
  for (const auto& [id, span] : spans) {
    const std::string level(span.at("level").as_string());
    const auto parent_id = std::string(span.at("parentSpanId").as_string());
    if (parent_id.empty()) {
      ++roots;
      EXPECT_EQ(span.at("name").as_string(), job);
      EXPECT_EQ(level, "/");
      continue;
    }
    const auto parent = spans.find(parent_id);
    ASSERT_NE(parent, spans.end()) << span.at("name") << " " << level;
    const auto up = level.substr(0, level.rfind('/'));
    EXPECT_EQ(parent->second.at("level").as_string(), up.empty() ? "/" : up) << span.at("name") << " " << level;
    EXPECT_EQ(chain_up(spans, span).back().at("name").as_string(), job) << span.at("name") << " " << level;
  }
  EXPECT_EQ(roots, 1u);
}

json::object export_and_decode(const fs::path& out, const std::vector<std::string>& inputs,
                               const process_options& env) {
  std::vector<std::string> args = {"trace", "otlp"};
  args.insert(args.end(), inputs.begin(), inputs.end());
  args.insert(args.end(), {"-o", out.string()});
  const auto r = run_ferry(args, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return decode_otlp(out);
}

TEST_F(trace_export, otlp_of_a_run_with_a_python_child_decodes_with_every_parent_resolved) {
  const auto trace = s().home_ / "run.jsonl";
  const auto children = s().home_ / "children";
  fs::create_directories(children);
  const auto r = run_ferry({"--trace", trace.string(), "run", "--nodes", "2", "--env",
                            "FERRY_TRACE_DIR=" + children.string(), "--", system_python, "traced.py"},
                           s().env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(files_in(children).size(), 2u) << "each node's Python program writes a file of its own";

  const auto summary = export_and_decode(s().home_ / "run.otlp.jsonl", {trace.string(), children.string()}, s().env());
  ASSERT_FALSE(summary.empty());
  const auto actions = actions_in(trace, files_in(children));
  EXPECT_GT(actions, 20u);
  EXPECT_EQ(summary.at("span_count").as_int64(), static_cast<std::int64_t>(actions));
  EXPECT_EQ(summary.at("unresolved_parents").as_int64(), 0);
  EXPECT_EQ(summary.at("duplicate_span_ids").as_int64(), 0);

  const auto spans = by_span_id(summary);
  expect_one_tree(spans, action_types::run::job);
  std::set<std::string> trace_ids;
  std::size_t python_work = 0;
  for (const auto& [id, span] : spans) {
    trace_ids.insert(std::string(span.at("traceId").as_string()));
    if (span.at("name") != "user:work") continue;
    ++python_work;
    // The Python program's action sits under ferry's: up through the task ferry ran on the node, to the run.
    EXPECT_EQ(span.at("service"), "python");
    const auto chain = chain_up(spans, span);
    EXPECT_EQ(chain.back().at("name").as_string(), action_types::run::job);
    EXPECT_EQ(chain.back().at("service"), "ferry");
    EXPECT_TRUE(std::any_of(chain.begin(), chain.end(),
                            [](const json::object& c) { return c.at("name").as_string() == action_types::agent::task; }));
  }
  EXPECT_EQ(python_work, 2u);
  EXPECT_EQ(trace_ids.size(), 1u) << "one run, one task, one trace";
}

TEST_F(trace_export, otlp_of_a_map_on_two_nodes_decodes_with_every_parent_resolved) {
  const auto trace = s().home_ / "map2.jsonl";
  // Six tasks, three at once on a node: two nodes.
  const auto r = run_ferry({"--trace", trace.string(), "map", "--nodes", "2", "--range", "1..6", "--concurrency", "3",
                            "--", "sh", "-c", "echo $1", "_", "{}"},
                           s().env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(job_nodes(trace).size(), 2u);
  const auto summary = export_and_decode(s().home_ / "map2.otlp.jsonl", {trace.string()}, s().env());
  ASSERT_FALSE(summary.empty());
  const auto actions = actions_in(trace);
  EXPECT_EQ(summary.at("span_count").as_int64(), static_cast<std::int64_t>(actions));
  EXPECT_EQ(summary.at("unresolved_parents").as_int64(), 0);
  EXPECT_EQ(summary.at("duplicate_span_ids").as_int64(), 0);
  const auto spans = by_span_id(summary);
  expect_one_tree(spans, action_types::map::job);
  std::size_t tasks = 0, node_spans = 0;
  for (const auto& [id, span] : spans) {
    if (span.at("name").as_string() == action_types::agent::task) ++tasks;
    if (span.at("service") == "ferry-node") ++node_spans;
  }
  EXPECT_EQ(tasks, 6u);
  EXPECT_GT(node_spans, 0u) << "the node program's actions are in the export";
}

struct chrome_event {
  std::int64_t begin, end;
  std::string name;
};

TEST_F(trace_export, chrome_of_a_map_on_four_nodes_has_no_overlap_on_any_track) {
  const auto trace = s().home_ / "map4.jsonl";
  // Eight tasks, two at once on a node: four nodes.
  const auto r = run_ferry({"--trace", trace.string(), "map", "--nodes", "4", "--range", "1..8", "--concurrency", "2",
                            "--", "sh", "-c", "sleep 0.2"},
                           s().env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(job_nodes(trace).size(), 4u);
  const auto out = s().home_ / "map4.json";
  const auto c = run_ferry({"trace", "chrome", trace.string(), "-o", out.string()}, s().env());
  ASSERT_EQ(c.exit_code, 0) << c.err;

  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<chrome_event>> tracks;
  std::set<std::pair<std::int64_t, std::int64_t>> named;
  std::size_t complete_events = 0;
  const auto doc = json::parse(read_file(out));
  for (const auto& e : doc.at("traceEvents").as_array()) {
    if (!e.as_object().contains("tid")) continue;  // process_name
    const std::pair track{e.at("pid").as_int64(), e.at("tid").as_int64()};
    if (e.at("ph") == "M" && e.at("name") == "thread_name") named.insert(track);
    if (e.at("ph") != "X") continue;
    ++complete_events;
    const auto ts = e.at("ts").as_int64();
    tracks[track].push_back({ts, ts + e.at("dur").as_int64(), std::string(e.at("name").as_string())});
  }
  EXPECT_EQ(complete_events, actions_in(trace)) << "every action is drawn";

  std::size_t most_tracks_of_a_file = 0;
  std::map<std::int64_t, std::size_t> tracks_per_file;
  for (auto& [track, events] : tracks) {
    EXPECT_TRUE(named.contains(track)) << "track " << track.first << "/" << track.second << " has no thread_name";
    most_tracks_of_a_file = std::max(most_tracks_of_a_file, ++tracks_per_file[track.first]);
    // In order of start, outer first: each event either starts after the open ones end, or fits in the
    // innermost open one.
    std::sort(events.begin(), events.end(), [](const chrome_event& a, const chrome_event& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
    });
    std::vector<const chrome_event*> open;
    for (const auto& e : events) {
      while (!open.empty() && open.back()->end <= e.begin) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(e.end, open.back()->end) << e.name << " [" << e.begin << ", " << e.end << ") overlaps "
                                           << open.back()->name << " [" << open.back()->begin << ", "
                                           << open.back()->end << ") on track " << track.first << "/" << track.second;
      }
      open.push_back(&e);
    }
  }
  // Four nodes' work at once in ferry's own file: the check above had overlapping actions to keep apart.
  EXPECT_GE(most_tracks_of_a_file, 4u);
}

}  // namespace
}  // namespace ferry::test
