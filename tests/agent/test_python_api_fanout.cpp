// The Python API's large arguments go the way the layers go in a job that fans out (docs/python-api.md,
// docs/nodes.md "Many nodes"): storage serves a blob to the seeds alone, every other node fetches it from its
// parent's `ferry-node serve`, and a parent that refuses leaves its children to storage, with every result
// right either way. A real client script (the `ferry` package under python/, Debian's python3 in a venv with
// a copy of cloudpickle) drives `ferry api` on local nodes, against moto_server, whose request log counts
// the blob's GETs.
#include "support/moto.hpp"
#include "support/process.hpp"
#include "tracing/action_types.hpp"

#include "local_run.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr std::size_t fanout_api_nodes = 6;

// 200 tasks share one 20 MB argument (a blob: its pickle is over 1 MiB), two workers a node. A task takes a
// moment, so that every node that comes up gets tasks of its own.
constexpr std::string_view shared_argument_script = R"(import random, time, ferry
big = random.Random(34).randbytes(20 << 20)

def look(b, k):
    time.sleep(0.2)
    return (len(b), b[k], k)

with ferry.Executor(nodes=6, concurrency=2) as ex:
    got = list(ex.map(look, [big] * 200, range(200), chunksize=1))
wrong = [r for r in got if r != (len(big), big[r[2]], r[2])]
print("results", len(got), "wrong", len(wrong))
)";

// Every file under `root`, read while the nodes run: one that goes meanwhile (a node's busy marker) is skipped.
std::vector<fs::path> files_under(const fs::path& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) out.push_back(it->path());
  }
  return out;
}

class python_api_fanout : public local_nodes {
 protected:
  python_api_fanout() : local_nodes("ferry-api-fanout") {}

  void SetUp() override {
    local_nodes::SetUp();
    if (!moto_) return;
    write_file(project() / "main.py", std::string(shared_argument_script));
    write_file(project() / ".gitignore", ".venv/\n");
    std::string why;
    const auto site = make_venv(project() / ".venv", why);
    ASSERT_FALSE(site.empty()) << why;
    // The workers unpickle the task's function (pickled by value) with cloudpickle, shipped in the venv.
    fs::copy("/usr/lib/python3/dist-packages/cloudpickle", site / "cloudpickle", fs::copy_options::recursive);
  }

  process_result run_script() const {
    auto o = env();
    o.env["PYTHONPATH"] = std::string(FERRY_SOURCE_DIR) + "/python";
    o.env["FERRY_BIN"] = FERRY_BINARY;
    o.env["FERRY_NODES_MAX_NODES"] = std::to_string(fanout_api_nodes);
    o.env["FERRY_NODES_FANOUT_MIN"] = "2";
    o.env["FERRY_NODES_FANOUT_SEEDS"] = "1";
    o.env["FERRY_NODES_FANOUT_DEGREE"] = "5";  // the seed feeds the other five
    o.env["FERRY_NODES_FANOUT_HOLD"] = "60s";  // however busy the machine, children wait for their parent
    return run({(project() / ".venv" / "bin" / "python").string(), "main.py"}, o);
  }

  // GETs of a stored argument that storage answered so far.
  std::size_t blob_gets() const {
    std::size_t n = 0;
    std::istringstream in(moto_->log());
    for (std::string line; std::getline(in, line);)
      if (contains(line, "\"GET /") && contains(line, "/p/blobs/")) ++n;
    return n;
  }

  // The agent's offers of the blob in the newest trace of `ferry api`: node -> source (storage, or the
  // parent's server), for the offers a task needed; with `fetches`, also a parent's fetch for its children.
  std::map<std::string, std::string> offers(bool fetches = false) const {
    std::map<std::string, std::string> out;
    fs::path newest;
    for (const auto& file : files_under(home_.path() / "state")) {
      const auto name = file.filename().string();
      if (!name.ends_with(".jsonl") || contains(name, ".node-")) continue;
      if (!contains(read_file(file), action_types::api::offer)) continue;
      if (newest.empty() || fs::last_write_time(file) > fs::last_write_time(newest)) newest = file;
    }
    if (newest.empty()) return out;
    for (const auto& m : trace_file_lines(newest)) {
      if (trace_type(m) != action_types::api::offer || (!fetches && m.at("fetch").as_bool())) continue;
      out.emplace(trace_text(m, "node"), trace_text(m, "source"));
    }
    return out;
  }

  // Every blob the node caches under HOME hold (one per node that fetched it).
  std::vector<fs::path> cached_blobs() const {
    std::vector<fs::path> out;
    for (const auto& file : files_under(home_.path() / "state"))
      if (file.parent_path().filename() == "blobs" && file.filename().string().size() == 64) out.push_back(file);
    return out;
  }
};

TEST_F(python_api_fanout, storage_serves_a_shared_argument_to_the_seed_alone_and_a_refusing_parent_sends_children_to_storage) {
  const auto first = run_script();
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_EQ(first.out, "results 200 wrong 0\n") << first.err;
  const auto given = offers();
  std::size_t from_peer = 0;
  for (const auto& [node, source] : given) {
    from_peer += source.starts_with("http://10.200.") ? 1 : 0;
    EXPECT_TRUE(source == "storage" || source.starts_with("http://10.200.")) << node << ": " << source;
  }
  ASSERT_GE(from_peer, 2u) << "too few nodes ran tasks for the test to tell";
  EXPECT_EQ(blob_gets(), 1u) << moto_->log();  // the seed's, once for its two workers
  const auto cached = cached_blobs();
  EXPECT_GE(cached.size(), 1 + from_peer);  // each node that needed it has it

  // Every node's server refuses the blob: a mark of a failed fetch beside it, which no worker can clear.
  for (const auto& blob : cached) {
    fs::remove(blob);
    fs::create_directory(blob.string() + ".failed");
  }
  const auto before = blob_gets();
  const auto second = run_script();
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_EQ(second.out, "results 200 wrong 0\n") << second.err;
  std::size_t sent_to_peer = 0;
  for (const auto& [node, source] : offers()) sent_to_peer += source == "storage" ? 0 : 1;
  ASSERT_GE(sent_to_peer, 1u);
  // The parent turned them away, and each node whose tasks needed it went to storage: one GET per node. A
  // parent asked to fetch it only for its children may end before it does.
  const auto gets = blob_gets() - before;
  EXPECT_GE(gets, offers().size()) << moto_->log();
  EXPECT_LE(gets, offers(true).size()) << moto_->log();
}

}  // namespace
}  // namespace ferry::test
