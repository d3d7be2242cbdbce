// `ferry run` and `ferry map` end to end through the ferry binary: a project with its own package and a
// venv's site-packages, moto_server as storage (on the bridge address, where nodes reach it; signature
// checking off, because moto fails presigned GETs while it is on), and real nodes: local ones (sshd in
// network namespaces) and ec2 ones from moto brought up by the harness.
#include "support/venv_closure.hpp"
#include "support/eliot.hpp"
#include "net/digest.hpp"
#include "packaging/layer.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/quoted.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include "local_run.hpp"
#include "ec2_harness.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <atomic>
#include <cctype>
#include <csignal>
#include <map>
#include <random>
#include <regex>
#include <fstream>
#include <sstream>
#include <thread>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;



class run_cli : public local_nodes {
 protected:
  run_cli() : local_nodes("ferry-run") {}

  void SetUp() override {
    local_nodes::SetUp();
    if (!moto_) return;
    make_project();
  }

  // A workspace with its own package, and a venv whose site-packages holds a "third-party" package.
  void make_project() {
    write_file(project() / "app" / "__init__.py", "VALUE = 'from-app'\n");
    write_file(project() / "main.py",
               "import sys, app, thirdparty\n"
               "print(app.VALUE, thirdparty.VALUE, sys.argv[1:])\n");
    write_file(project() / ".gitignore", ".venv/\n");
    std::string why;
    site_ = make_venv(project() / ".venv", why);
    ASSERT_FALSE(site_.empty()) << why;
    write_file(fs::path(site_) / "thirdparty" / "__init__.py", "VALUE = 'from-venv'\n");
    write_file(project() / "ferry.toml", "[packaging]\npython = \".venv/bin/python\"\n");
  }

  // Every action type in a trace file and in the node program's files beside it, in order.
  std::vector<std::string> started_types(const fs::path& trace) const {
    std::vector<json::object> lines;
    std::ifstream in(trace);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lines.push_back(json::parse(line).as_object());
    for (auto& m : node_lines(trace)) lines.push_back(std::move(m));
    std::vector<std::string> out;
    for (const auto& m : lines) {
      if (m.contains("action_type") && m.at("action_status").as_string() == "started")
        out.emplace_back(m.at("action_type").as_string());
    }
    return out;
  }
  // S3 requests that write (PutObject, CreateMultipartUpload, UploadPart, ...) in a trace file.
  static std::size_t s3_writes(const fs::path& trace) {
    std::size_t n = 0;
    std::ifstream in(trace);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      const auto m = json::parse(line).as_object();
      const auto* type = m.if_contains("message_type");
      if (!type || type->as_string() != action_types::s3::call) continue;
      const auto op = std::string(m.at("operation").as_string());
      if (op != "GetObject" && op != "HeadObject" && op != "ListObjectsV2") ++n;
    }
    return n;
  }
  static std::size_t count(const std::vector<std::string>& v, std::string_view what) {
    return static_cast<std::size_t>(std::count(v.begin(), v.end(), what));
  }

  std::string site_;
};

TEST_F(run_cli, run_ships_the_project_and_a_second_run_moves_nothing) {
  auto o = env();
  const auto trace1 = home_ / "run1.jsonl";
  const auto first = run_ferry({"--trace", trace1.string(), "run", "--", "python3", "main.py", "a b", "$x"}, o);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_EQ(first.out, "from-app from-venv ['a b', '$x']\n");
  EXPECT_TRUE(contains(first.err, "ready in ")) << first.err;
  EXPECT_TRUE(contains(first.err, "(1 new)")) << first.err;
  // The first pack says what it ships; the project packs with its own venv, so no advice to make one.
  EXPECT_TRUE(contains(first.err, "ferry: first pack of this project: ")) << first.err;
  EXPECT_TRUE(contains(first.err, "; largest: ")) << first.err;
  EXPECT_FALSE(contains(first.err, "a venv")) << first.err;
  const auto types1 = started_types(trace1);
  EXPECT_GE(count(types1, action_types::node::shard), 2u);
  EXPECT_EQ(count(types1, action_types::agent::task), 1u);
  EXPECT_EQ(count(types1, action_types::provision::node), 1u);

  // Nothing changed: nothing is uploaded, nothing downloaded, the node is the warm one.
  const auto trace2 = home_ / "run2.jsonl";
  const auto second = run_ferry({"--trace", trace2.string(), "run", "--", "python3", "main.py"}, o);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_TRUE(contains(second.err, "nodes ")) << second.err;
  EXPECT_TRUE(contains(second.err, "(warm)")) << second.err;
  EXPECT_TRUE(contains(second.err, "env ")) << second.err;
  EXPECT_TRUE(contains(second.err, "(cached)")) << second.err;
  EXPECT_FALSE(contains(second.err, "first pack")) << second.err;
  const auto types2 = started_types(trace2);
  EXPECT_EQ(count(types2, action_types::node::shard), 0u);
  EXPECT_EQ(count(types2, action_types::packaging::upload) + count(types2, action_types::s3::multipart_upload), 0u);
  EXPECT_EQ(s3_writes(trace2), 0u);
  EXPECT_GT(s3_writes(trace1), 0u) << "the first run's uploads are not where this test looks for them";

  // A change to one file ships one layer, and the node sees it.
  write_file(project() / "app" / "__init__.py", "VALUE = 'changed'\n");
  const auto trace3 = home_ / "run3.jsonl";
  const auto third = run_ferry({"--trace", trace3.string(), "run", "--", "python3", "main.py"}, o);
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(third.out, "changed from-venv []\n");
  EXPECT_EQ(count(started_types(trace3), action_types::node::shard), 1u);

  // The command's exit code and signals come back.
  EXPECT_EQ(run_ferry({"run", "--", "sh", "-c", "exit 7"}, o).exit_code, 7);
  EXPECT_EQ(run_ferry({"run", "--", "sh", "-c", "kill -TERM $$"}, o).exit_code, 128 + SIGTERM);
  const auto env_var = run_ferry({"run", "--env", "GREETING=hi there", "--", "sh", "-c", "echo \"$GREETING\""}, o);
  EXPECT_EQ(env_var.out, "hi there\n") << env_var.err;
  EXPECT_EQ(run_ferry({"run", "--env", "1BAD=x", "--", "true"}, o).exit_code, 2);
}

// A file over the piece size (a CUDA library, a model) goes as a shard per piece, each written at its offset
// on the node: the node has the same bytes, and the next run finds every piece in the hash cache and storage.
TEST_F(run_cli, a_file_over_the_piece_size_arrives_whole_from_its_pieces) {
  auto o = env();
  std::string model(2 * packaging::piece_size + 4321, '\0');
  for (std::size_t i = 0; i < model.size(); i += 509) model[i] = static_cast<char>('a' + (i / 4096) % 26);
  write_file(project() / "model.bin", model);
  const auto trace1 = home_ / "pieces1.jsonl";
  const auto first = run_ferry({"--trace", trace1.string(), "run", "--", "sha256sum", "model.bin"}, o);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_EQ(first.out, net::hex_sha256(model) + "  model.bin\n");
  // The workspace's small files, the venv's package, and three pieces.
  EXPECT_GE(count(started_types(trace1), action_types::node::shard), 5u);

  const auto trace2 = home_ / "pieces2.jsonl";
  const auto second = run_ferry({"--trace", trace2.string(), "run", "--", "sha256sum", "model.bin"}, o);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_EQ(s3_writes(trace2), 0u);
  EXPECT_EQ(count(started_types(trace2), action_types::node::shard), 0u);
}

TEST_F(run_cli, a_zstd_store_and_a_deflate_store_give_a_fresh_node_the_same_files) {
  // A file of several zstd frames (and its seek table), a symlink, an empty file, a name not in ASCII.
  std::string big;
  for (std::uint64_t i = 0; big.size() < (9u << 20) + 12345; ++i) big += fmt::format("line {} of a large module\n", i * 7919 % 100003);
  write_file(project() / "app" / "big.txt", big);
  write_file(project() / "app" / "empty.py", "");
  write_file(project() / "app" / "d\xc3\xa9j\xc3\xa0.py", "X = 'non-ascii name'\n");
  fs::create_symlink("big.txt", project() / "app" / "big-link.txt");
  write_file(project() / "check.py",
             "import hashlib, os, app, thirdparty\n"
             "for root in (os.path.dirname(app.__file__), os.path.dirname(thirdparty.__file__)):\n"
             "    for name in sorted(os.listdir(root)):\n"
             "        p = os.path.join(root, name)\n"
             "        if os.path.islink(p): print(name, '->', os.readlink(p))\n"
             "        elif os.path.isfile(p): print(name, oct(os.stat(p).st_mode), hashlib.sha256(open(p, 'rb').read()).hexdigest())\n");
  std::string expected;
  {
    const auto local = run({"python3", (project() / "check.py").string()},
                           [&] { process_options o; o.cwd = project(); o.env["PYTHONPATH"] = project().string() + ":" + site_; o.env["PYTHONDONTWRITEBYTECODE"] = "1"; return o; }());
    ASSERT_EQ(local.exit_code, 0) << local.err;
    expected = local.out;
  }
  ASSERT_TRUE(contains(expected, "big-link.txt -> big.txt")) << expected;
  ASSERT_TRUE(contains(expected, net::hex_sha256(big))) << expected;

  std::map<std::string, std::string> seen;
  for (const auto* codec : {"zstd", "deflate"}) {
    SCOPED_TRACE(codec);
    auto o = env();
    o.env["FERRY_PACKAGING_CODEC"] = codec;
    const auto trace = home_ / fmt::format("run-{}.jsonl", codec);
    const auto r = run_ferry({"--trace", trace.string(), "run", "--", "python3", "check.py"}, o);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.out, expected);
    EXPECT_GE(count(started_types(trace), action_types::node::shard), 2u) << "a fresh node fetched the layers";
    // The next codec's run gets a node with an empty layer cache, so it reads that codec's zips.
    ASSERT_EQ(run_ferry({"nodes", "down", "--all"}, env()).exit_code, 0);
  }
  // Both stores are there, side by side under one prefix.
  const auto listing = run({"aws", "s3", "ls", "--recursive", "s3://" + bucket() + "/p/layers/"}, moto_->process_env());
  ASSERT_EQ(listing.exit_code, 0) << listing.err;
  EXPECT_TRUE(contains(listing.out, ".zstd.zip\n")) << listing.out;
  EXPECT_TRUE(std::regex_search(listing.out, std::regex("/[0-9a-f]{64}\\.zip\n"))) << listing.out;
}

// Output of several nodes mixes; the run ends with a line per node that failed, to find them by.
TEST_F(run_cli, a_run_on_several_nodes_ends_with_a_line_per_failed_node) {
  const auto r = run_ferry({"run", "--nodes", "2", "--", "sh", "-c",
                            "echo Traceback >&2; echo \"ValueError: bad input\" >&2; echo >&2; exit 3"},
                           env());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const std::regex failed_line("^ferry: ([^ ]+) failed: exit code 3: ValueError: bad input$");
  std::vector<std::string> lines;
  std::istringstream in(r.err);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GE(lines.size(), 2u) << r.err;
  std::smatch a, b;
  ASSERT_TRUE(std::regex_match(lines[lines.size() - 2], a, failed_line)) << r.err;
  ASSERT_TRUE(std::regex_match(lines[lines.size() - 1], b, failed_line)) << r.err;
  EXPECT_NE(a[1].str(), b[1].str()) << r.err;
  // Each is the name its output lines are prefixed with.
  EXPECT_TRUE(contains(r.err, a[1].str() + " | ValueError: bad input")) << r.err;
  EXPECT_TRUE(contains(r.err, b[1].str() + " | ValueError: bad input")) << r.err;
}

TEST_F(run_cli, a_python_program_continues_the_run_trace) {
  // eliot in the project's venv, as the workstation has it: the node's own dist-packages are hidden.
  const auto closure = run({"/usr/bin/python3", "-c", closure_script("eliot")});
  ASSERT_EQ(closure.exit_code, 0) << "python3-eliot is needed (scripts/setup.sh installs it): " << closure.err;
  ASSERT_GT(link_closure(closure.out, site_), 0) << closure.out;
  auto o = env();
  const auto python_trace = home_ / "python.jsonl";
  write_file(project() / "traced.py",
             "import os, eliot\n"
             "eliot.to_file(open(os.environ['OUT'], 'a'))\n"
             "with eliot.Action.continue_task(task_id=os.environ['FERRY_TASK_ID']):\n"
             "    with eliot.start_action(action_type='user:work'):\n"
             "        eliot.log_message(message_type='user:hello')\n");
  const auto trace = home_ / "run.jsonl";
  const auto r = run_ferry({"--trace", trace.string(), "run", "--env", "OUT=" + python_trace.string(), "--",
                            "/usr/bin/python3", "traced.py"},
                           o);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Each process wrote its own file: ferry, the node program (beside ferry's: its materialise, and the
  // idle watchdog it set on the node the run made), and the Python program.
  std::vector<std::string> files = {"/usr/bin/python3",
                                    (fs::path(FERRY_SOURCE_DIR) / "tests/peers/eliot_check.py").string(),
                                    trace.string(), python_trace.string()};
  for (const auto& e : fs::directory_iterator(home_.path()))
    if (e.path().filename().string().starts_with("run.node-")) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 6u);
  const auto parsed = run(files);
  ASSERT_EQ(parsed.exit_code, 0) << parsed.err;
  const auto tasks = json::parse(parsed.out).as_array();
  ASSERT_EQ(tasks.size(), 1u) << parsed.out;
  EXPECT_TRUE(tasks[0].at("complete").as_bool()) << parsed.out;
  EXPECT_EQ(tasks[0].at("root").at("action_type").as_string(), action_types::run::job);
  EXPECT_TRUE(contains(parsed.out, quoted(action_types::node::materialise))) << parsed.out;
  EXPECT_TRUE(contains(parsed.out, quoted(action_types::node::watchdog))) << parsed.out;
  EXPECT_TRUE(contains(parsed.out, "\"user:work\"")) << parsed.out;
  EXPECT_TRUE(contains(parsed.out, quoted(action_types::packaging::pack))) << parsed.out;
  EXPECT_TRUE(contains(parsed.out, quoted(action_types::provision::round))) << parsed.out;
}

TEST_F(run_cli, map_runs_every_input_and_keeps_each_result) {
  auto o = env();
  const auto out_dir = home_ / "results";
  const auto r = run_ferry({"map", "--range", "1..20", "--nodes", "2", "--concurrency", "4", "--output",
                            out_dir.string(), "--", "sh", "-c", "echo $(( $1 * 2 )); [ $1 != 13 ] || exit 5", "_",
                            "{}"},
                           o);
  EXPECT_EQ(r.exit_code, 1) << r.err;  // task 13 fails on every attempt
  EXPECT_TRUE(contains(r.err, "20 tasks: 19 done, 1 failed")) << r.err;
  std::ifstream in(out_dir / "tasks.jsonl");
  std::string line;
  std::size_t lines = 0;
  while (std::getline(in, line)) {
    const auto t = json::parse(line).as_object();
    const auto index = t.at("task").as_int64();
    const auto input = std::stoi(std::string(t.at("input").as_string()));
    EXPECT_EQ(input, index + 1);
    EXPECT_EQ(read_file(out_dir / fmt::format("{}.out", index)), fmt::format("{}\n", input * 2));
    if (input == 13) {
      EXPECT_EQ(t.at("exit_code").as_int64(), 5);
      EXPECT_EQ(t.at("attempts").as_int64(), 3);  // agent.retries = 2
    } else {
      EXPECT_TRUE(t.at("ok").as_bool()) << line;
    }
    ++lines;
  }
  EXPECT_EQ(lines, 20u);
}

// A map shows its progress on one line of a terminal (`script` gives it one, for both streams), and
// nothing of it when its output goes elsewhere.
TEST_F(run_cli, a_map_shows_its_progress_on_a_terminal_only) {
  auto o = env();
  const std::vector<std::string> argv = {FERRY_BINARY, "map", "--range", "1..4", "--", "sh", "-c", "echo $1",
                                         "_",          "{}"};
  const auto piped = run(argv, o);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_TRUE(contains(piped.err, "4 tasks: 4 done")) << piped.err;
  EXPECT_FALSE(contains(piped.err, "map  ")) << piped.err;
  EXPECT_FALSE(contains(piped.err, "\r")) << piped.err;

  std::string line;
  for (const auto& word : argv) {
    std::string quoted_word = "'";
    for (char c : word) quoted_word += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += quoted_word + "' ";
  }
  const auto on_tty = run({"script", "-q", "-e", "-c", line, "/dev/null"}, o);
  ASSERT_EQ(on_tty.exit_code, 0) << on_tty.out << on_tty.err;
  EXPECT_TRUE(contains(on_tty.out, "\r\x1b[Kmap  0 / 4 done, 0 failed, 0 retried")) << on_tty.out;
  EXPECT_TRUE(contains(on_tty.out, "4 tasks: 4 done")) << on_tty.out;
}

// Per shard of each layer, where its fetches came from over every node's trace: {storage, peer}.
std::map<std::string, std::pair<std::size_t, std::size_t>> fetches_by_shard(const fs::path& trace) {
  std::map<std::string, std::pair<std::size_t, std::size_t>> out;
  for (const auto& m : node_lines(trace)) {
    if (!m.contains("action_type") || m.at("action_type").as_string() != action_types::node::shard) continue;
    if (m.at("action_status").as_string() != "started") continue;
    const auto key = fmt::format("{}/{}", std::string(m.at("layer").as_string()), m.at("shard").as_int64());
    const auto source = std::string(m.at("source").as_string());
    auto& [storage, peer] = out[key];
    (source == "storage" ? storage : peer) += 1;
    EXPECT_TRUE(source == "storage" || source.starts_with("http://10.200.")) << source;
  }
  return out;
}

TEST_F(run_cli, a_job_of_many_nodes_hands_its_layers_on_and_storage_serves_each_shard_to_the_seeds_alone) {
  auto o = env();
  o.env["FERRY_NODES_MAX_NODES"] = "5";
  o.env["FERRY_NODES_COUNT"] = "5";
  o.env["FERRY_NODES_FANOUT_MIN"] = "2";
  o.env["FERRY_NODES_FANOUT_SEEDS"] = "1";
  o.env["FERRY_NODES_FANOUT_DEGREE"] = "2";  // a tree: node 1 feeds 2 and 3, node 2 feeds 4 and 5
  o.env["FERRY_NODES_FANOUT_HOLD"] = "60s";   // however busy the machine, children wait for their parents
  // A package of 6 shards: its layer goes to the nodes at its first stored shard, the rest in shard lines,
  // and each child fetches every one of them from its parent.
  o.env["FERRY_PACKAGING_SHARD_SIZE"] = "64KiB";
  for (int i = 0; i < 6; ++i) {
    std::string bytes(96 << 10, '\0');
    std::mt19937 random(static_cast<unsigned>(i));
    for (auto& b : bytes) b = static_cast<char>(random());
    write_file(fs::path(site_) / "thirdparty" / fmt::format("part{}.bin", i), bytes);
  }
  const auto trace1 = home_ / "fan1.jsonl";
  const auto first = run_ferry({"--trace", trace1.string(), "run", "--", "sh", "-c", "python3 main.py"}, o);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_EQ(first.out.size(), 5 * std::string("node-1 | from-app from-venv []\n").size()) << first.out;
  const auto shards = fetches_by_shard(trace1);
  EXPECT_GE(shards.size(), 7u);  // the workspace and the venv's package, in 6 shards or more
  for (const auto& [shard, sources] : shards) {
    EXPECT_EQ(sources.first, 1u) << shard << ": storage served it more than once";
    EXPECT_EQ(sources.second, 4u) << shard;
  }
  // Each server ended with its children, having served them.
  std::size_t served = 0;
  for (const auto& m : node_lines(trace1)) {
    if (m.contains("action_type") && m.at("action_type").as_string() == action_types::node::serve &&
        m.at("action_status").as_string() == "succeeded")
      served += static_cast<std::size_t>(m.at("served").as_int64());
  }
  EXPECT_GE(served, 4 * shards.size());
  EXPECT_EQ(read_file(trace1).find("x-ferry-token"), std::string::npos);

  // A lazy start: the new workspace goes the same way.
  write_file(project() / "app" / "__init__.py", "VALUE = 'changed'\n");
  const auto trace2 = home_ / "fan2.jsonl";
  const auto second = run_ferry({"--trace", trace2.string(), "run", "--", "python3", "main.py"}, o);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_TRUE(contains(second.out, "changed from-venv []")) << second.out;
  const auto again = fetches_by_shard(trace2);
  ASSERT_EQ(again.size(), 1u);  // only the workspace changed
  EXPECT_EQ(again.begin()->second.first, 1u);
  EXPECT_EQ(again.begin()->second.second, 4u);
}

// Write access to the bucket is not enough to run code on a node. The attack: a layer's zip replaced by
// another valid zip, and only the "sha256" and "zip_bytes" of its shard edited in the manifest, as text, to
// match. The manifest's key is the hash of its content text (without the digests), so the next pack finds
// it and believes it; no zip digest cache of the workstation's is ever asked. A fresh node must refuse
// the zip (its entries are not the ones this workstation packed), run nothing, and keep nothing of it.
TEST_F(run_cli, a_replaced_zip_with_its_manifest_edited_to_match_is_refused_and_never_runs) {
  auto o = env();
  const auto packed = run_ferry({"pack"}, o);
  ASSERT_EQ(packed.exit_code, 0) << packed.out << packed.err;
  const auto listed = moto_->aws({"s3", "ls", "--recursive", "s3://ferry-run/p/manifests/"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const auto at = listed.out.find("p/manifests/");
  ASSERT_NE(at, std::string::npos) << listed.out;
  const auto manifest_key = listed.out.substr(at, listed.out.find('\n', at) - at);
  temp_dir scratch;
  ASSERT_EQ(moto_->aws({"s3", "cp", "s3://ferry-run/" + manifest_key, (scratch / "manifest.json").string()}).exit_code, 0);
  auto text = read_file(scratch / "manifest.json");
  std::string key, sha256;
  std::uint64_t zip_bytes = 0;
  const auto manifest = json::parse(text);
  for (const auto& l : manifest.at("layers").as_array()) {
    if (l.at("name").as_string() != "workspace") continue;
    const auto& shard = l.at("shards").as_array().at(0).as_object();
    key = shard.at("key").as_string();
    sha256 = shard.at("sha256").as_string();
    zip_bytes = shard.at("zip_bytes").to_number<std::uint64_t>();
  }
  ASSERT_FALSE(key.empty()) << text;

  // Foreign code in a valid zip, within the shard's file and byte counts; it leaves a mark if it runs.
  const auto marker = scratch / "foreign-code-ran";
  const auto foreign_source = fmt::format("open('{}', 'w').close()\n", marker.string());
  const auto zip = scratch / "foreign.zip";
  ASSERT_EQ(run({"/usr/bin/python3", "-c",
                 "import sys, zipfile\n"
                 "with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:\n"
                 "    i = zipfile.ZipInfo('main.py'); i.external_attr = 0o100644 << 16; i.create_system = 3\n"
                 "    z.writestr(i, sys.argv[2])\n",
                 zip.string(), foreign_source})
                .exit_code,
            0);
  const auto foreign = read_file(zip);
  ASSERT_EQ(moto_->aws({"s3", "cp", zip.string(), "s3://ferry-run/" + key}).exit_code, 0);
  const auto old_digest = fmt::format("\"sha256\":\"{}\",\"zip_bytes\":{}", sha256, zip_bytes);
  ASSERT_NE(text.find(old_digest), std::string::npos) << text;
  text.replace(text.find(old_digest), old_digest.size(),
               fmt::format("\"sha256\":\"{}\",\"zip_bytes\":{}", net::hex_sha256(foreign), foreign.size()));
  write_file(scratch / "edited.json", text);
  ASSERT_EQ(moto_->aws({"s3", "cp", (scratch / "edited.json").string(), "s3://ferry-run/" + manifest_key}).exit_code, 0);

  const auto trace = home_ / "tampered.jsonl";
  const auto ran = run_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py"}, o);
  EXPECT_NE(ran.exit_code, 0) << ran.out << ran.err;
  EXPECT_FALSE(fs::exists(marker)) << "the foreign code ran: " << ran.out << ran.err;
  EXPECT_TRUE(contains(ran.err, "does not match what this workstation packed")) << ran.err;
  EXPECT_TRUE(contains(ran.err, "layer workspace")) << ran.err;
  EXPECT_TRUE(contains(ran.err, key)) << ran.err;
  // Nothing of the foreign layer is kept anywhere: not in the node's cache, not under a temporary name.
  for (const auto& e : fs::recursive_directory_iterator(home_.path(), fs::directory_options::skip_permission_denied)) {
    if (!e.is_regular_file() || e.path().filename() != "main.py") continue;
    EXPECT_NE(read_file(e.path()), foreign_source) << e.path();
  }
}

TEST_F(run_cli, a_node_lost_mid_map_leaves_its_tasks_to_the_others) {
  auto o = env();
  o.env["FERRY_NODES_MAX_NODES"] = "2";  // no replacement: the other node must take the lost one's tasks
  ASSERT_EQ(run_ferry({"nodes", "up", "2"}, o).exit_code, 0);
  const auto marks = home_ / "marks";
  fs::create_directories(marks);
  const auto trace = home_ / "map.jsonl";
  // Each task marks where it runs: sshd's SSH_CONNECTION names the node's own address.
  auto child = spawn_ferry({"--trace", trace.string(), "map", "--range", "1..12", "--concurrency", "2", "--", "sh",
                            "-c", fmt::format("echo \"$SSH_CONNECTION\" > {}/$1; sleep 1; echo done $1", marks.string()),
                            "_", "{}"},
                           o);
  // Once tasks run, end a node that runs one under the map (the other may still be making its layers).
  for (int i = 0; i < 400 && fs::is_empty(marks); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_FALSE(fs::is_empty(marks)) << "no task ever started";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the mark's line is written
  std::string where;
  for (const auto& e : fs::directory_iterator(marks)) where += read_file(e.path());
  ASSERT_EQ(json::parse(read_file(home_ / "state" / "ferry" / "nodes.json")).at("nodes").as_array().size(), 2u);
  const auto victim = node_named_by_address(home_.path(), where);
  ASSERT_FALSE(victim.empty()) << "no node's address in the marks: " << where;
  EXPECT_EQ(run_ferry({"nodes", "down", victim}, o).exit_code, 0);
  const auto r = child->wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "12 tasks: 12 done, 0 failed")) << r.err;
  std::size_t results = 0;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    const auto t = json::parse(line).as_object();
    EXPECT_TRUE(t.at("ok").as_bool()) << line;
    ++results;
  }
  EXPECT_EQ(results, 12u);
  const auto log = read_file(trace);
  EXPECT_TRUE(contains(log, action_types::map::node_lost)) << "the map never saw its node go";
}

TEST_F(run_cli, concurrent_runs_share_one_node_cache) {
  auto o = env();
  ASSERT_EQ(run_ferry({"nodes", "up", "1"}, o).exit_code, 0);
  write_file(project() / "data" / "big.bin", std::string(4 << 20, 'x'));
  std::vector<std::unique_ptr<child>> runs;
  for (int i = 0; i < 3; ++i) {
    runs.push_back(spawn_ferry({"run", "--", "python3", "-c",
                                "import os, app, thirdparty; print(os.path.getsize('data/big.bin'))"},
                               o));
  }
  for (auto& c : runs) {
    const auto r = c->wait();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, fmt::format("{}\n", 4 << 20)) << r.err;
  }
}

TEST_F(run_cli, a_pack_that_fails_cancels_the_provisioning_beside_it) {
  // A host whose port takes connections and never says a word: readiness would wait for it until
  // nodes.ready_timeout.
  const int silent = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof at;
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  ASSERT_EQ(::listen(silent, 16), 0);
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&at), &size), 0);
  write_file(project() / "ferry.toml",
             fmt::format("[packaging]\npython = \".venv/bin/python\"\n[nodes]\nprovider = \"ssh\"\n"
                         "ssh_hosts = [\"root@127.0.0.1:{}\"]\n",
                         ntohs(at.sin_port)));
  auto o = env();
  o.env["FERRY_NODES_READY_TIMEOUT"] = "120s";
  o.env["FERRY_STORAGE_URL"] = "s3://no-such-bucket-for-this-pack/p";  // the pack fails at once
  const auto trace = home_ / "failed-pack.jsonl";
  const auto r = run_ferry({"--trace", trace.string(), "run", "--", "true"}, o);
  ::close(silent);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "no-such-bucket-for-this-pack")) << r.err;
  // The node's wait ended because the pack failed, not at its own deadline.
  std::size_t waits = 0;
  std::ifstream in(trace);
  for (std::string line; std::getline(in, line);) {
    const auto m = json::parse(line).as_object();
    const auto* type = m.if_contains("action_type");
    if (!type || type->as_string() != action_types::readiness::ready || m.at("action_status").as_string() == "started")
      continue;
    ++waits;
    EXPECT_EQ(m.at("action_status").as_string(), "failed") << line;
    EXPECT_EQ(m.at("reason").as_string(), "cancelled") << line;
  }
  EXPECT_EQ(waits, 1u) << read_file(trace);
}

TEST_F(run_cli, ctrl_c_stops_the_remote_command_and_closes_the_trace) {
  auto o = env();
  const auto pid_file = home_ / "remote.pid";
  const auto trace = home_ / "run.jsonl";
  auto c = spawn_ferry({"--trace", trace.string(), "run", "--", "sh", "-c",
                        fmt::format("sleep 60 & echo $! > {}; wait", pid_file.string())},
                       o);
  int pid = 0;
  for (int i = 0; i < 600 && pid == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto text = read_file(pid_file);
    if (!text.empty() && text.back() == '\n') pid = std::stoi(text);
  }
  ASSERT_GT(pid, 0) << "the remote command never started";
  c->signal(SIGINT);
  const auto r = c->wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_TRUE(r.err.ends_with("ferry: interrupted\n")) << r.err;
  EXPECT_FALSE(contains(r.err, "ferry: error:")) << r.err;
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = ::kill(pid, 0) != 0 || contains(read_file(fmt::format("/proc/{}/stat", pid)), ") Z ");
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone);
  const auto parsed = run({"/usr/bin/python3", (fs::path(FERRY_SOURCE_DIR) / "tests/peers/eliot_check.py").string(),
                           trace.string()});
  ASSERT_EQ(parsed.exit_code, 0) << parsed.err;
  // The run's action ends, cancelled. (Eliot calls the tree complete only when the command used the level
  // FERRY_TASK_ID reserved for it, which `sleep` does not; a_python_program_continues_the_run_trace checks that.)
  const auto tasks = json::parse(parsed.out).as_array();
  ASSERT_EQ(tasks.size(), 1u) << parsed.out;
  EXPECT_EQ(tasks[0].at("root").at("status").as_string(), "failed") << parsed.out;
  EXPECT_EQ(tasks[0].at("root").at("reason").as_string(), "cancelled") << parsed.out;
}

TEST_F(run_cli, a_node_made_by_a_run_stops_when_idle_and_the_next_run_replaces_it) {
  auto o = env();
  o.env["FERRY_NODES_IDLE_TIMEOUT"] = "3s";
  o.env["FERRY_NODES_WATCHDOG_INTERVAL"] = "500ms";
  const auto first = run_ferry({"run", "--", "true"}, o);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  bool stopped = false;
  for (int i = 0; i < 120 && !stopped; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    stopped = contains(run_ferry({"nodes", "ls"}, o).out, "stopped");
  }
  ASSERT_TRUE(stopped) << "the node never stopped itself: " << run_ferry({"nodes", "ls"}, o).out;
  // The stopped node is ended and forgotten, and a new one takes its place.
  const auto second = run_ferry({"run", "--", "python3", "main.py"}, o);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, "from-app from-venv []\n");
  EXPECT_TRUE(contains(second.err, "(1 new)")) << second.err;
  const auto ls = run_ferry({"nodes", "ls"}, o);
  EXPECT_FALSE(contains(ls.out, "stopped")) << ls.out;
}

TEST_F(run_cli, with_a_warm_minimum_the_node_stays_up) {
  auto o = env();
  o.env["FERRY_NODES_IDLE_TIMEOUT"] = "2s";
  o.env["FERRY_NODES_WATCHDOG_INTERVAL"] = "500ms";
  o.env["FERRY_NODES_MIN_NODES"] = "1";
  ASSERT_EQ(run_ferry({"run", "--", "true"}, o).exit_code, 0);
  std::this_thread::sleep_for(std::chrono::seconds(5));
  const auto ls = run_ferry({"nodes", "ls"}, o);
  EXPECT_TRUE(contains(ls.out, "running")) << ls.out;
  const auto again = run_ferry({"run", "--", "true"}, o);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(contains(again.err, "(warm)")) << again.err;
}

TEST_F(run_cli, trace_stats_of_a_real_run_and_map_add_up) {
  auto o = env();
  const auto run_trace = home_ / "run.jsonl";
  const auto map_trace = home_ / "map.jsonl";
  ASSERT_EQ(run_ferry({"--trace", run_trace.string(), "run", "--", "python3", "main.py"}, o).exit_code, 0);
  const auto m = run_ferry({"--trace", map_trace.string(), "map", "--range", "1..6", "--concurrency", "2", "--", "sh",
                            "-c", "sleep 0.2"},
                           o);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const auto stats = run_ferry({"trace", "stats", "--json", run_trace.string(), map_trace.string()}, o);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const auto doc = json::parse(stats.out).as_object();
  // Commands that do not use eliot leave their handed-off level empty; that is not a lost message.
  EXPECT_TRUE(doc.at("incomplete_eliot_tasks").as_array().empty()) << stats.out;
  const auto& jobs = doc.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 2u);
  for (const auto& jv : jobs) {
    const auto& job = jv.as_object();
    // The critical path covers the job exactly: its links add up to the job's duration.
    double path = 0;
    for (const auto& link : job.at("critical_path").as_array()) path += link.at("duration").to_number<double>();
    EXPECT_NEAR(path, job.at("duration").to_number<double>(), 1e-6) << job.at("action_type");
    // Busy time never exceeds provisioned time, per node and in all.
    for (const auto& n : job.at("nodes").as_array()) {
      EXPECT_LE(n.at("busy_seconds").to_number<double>(), n.at("provisioned_seconds").to_number<double>() + 1e-9);
    }
    const auto& u = job.at("utilisation").as_object();
    EXPECT_LE(u.at("busy_node_seconds").to_number<double>(), u.at("provisioned_node_seconds").to_number<double>());
    EXPECT_GT(u.at("busy_node_seconds").to_number<double>(), 0.0);
    const auto expected_tasks = job.at("action_type").as_string() == action_types::map::job ? 6 : 1;
    EXPECT_EQ(job.at("tasks").as_int64(), expected_tasks);
    EXPECT_EQ(job.at("pending").at("count").as_int64(), expected_tasks);
  }
}

// ---- data staging ----

// Objects of mixed sizes under s3://ferry-run/PREFIX, from files written here (some in subdirectories).
fs::path make_objects(const moto_server& moto, const fs::path& dir, const std::string& prefix, int count,
                      std::size_t max_size) {
  std::mt19937 random(7);
  for (int i = 0; i < count; ++i) {
    const auto name = fmt::format("{}f{:03}.bin", i % 5 == 0 ? "sub/dir/" : "", i);
    std::string bytes(random() % (max_size + 1), '\0');
    for (auto& b : bytes) b = static_cast<char>(random());
    write_file(dir / name, bytes);
  }
  const auto r = moto.aws({"s3", "cp", "--recursive", "--quiet", dir.string(), "s3://ferry-run/" + prefix});
  if (r.exit_code != 0) ADD_FAILURE() << r.err;
  return dir;
}

TEST_F(run_cli, stage_copies_every_object_and_a_second_run_fetches_nothing) {
  auto o = env();
  const auto source = make_objects(*moto_, home_ / "source", "data", 200, 200 << 10);
  const auto staged = home_ / "staged";
  const auto spec = "s3://ferry-run/data=" + staged.string();
  const auto trace1 = home_ / "stage1.jsonl";
  const auto first = run_ferry({"--trace", trace1.string(), "run", "--stage", spec, "--", "sh", "-c",
                                "find \"$0\" -type f -not -path '*/.ferry-stage*' | wc -l", staged.string()},
                               o);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, "200\n");
  // Byte for byte, nothing more (the staging's own records stay in .ferry-stage).
  const auto diff = run({"diff", "-r", "--exclude=.ferry-stage", source.string(), staged.string()});
  EXPECT_EQ(diff.exit_code, 0) << diff.out << diff.err;
  EXPECT_TRUE(contains(read_file(trace1), R"("fetched":200)")) << "the first run fetched every object";

  const auto trace2 = home_ / "stage2.jsonl";
  const auto second = run_ferry({"--trace", trace2.string(), "run", "--stage", spec, "--", "true"}, o);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const auto log = read_file(trace2);
  EXPECT_TRUE(contains(log, R"("fetched":0,"kept":200)"))
      << log.substr(log.find(quoted(action_types::agent::stage)), 400);
}

// What a local user of a node could read of a staging while it runs: every process's argv, and every
// file under the staging directory (its own records included) that others may read.
// Whether a child has ended (it stays a zombie until waited for, with an empty cmdline).
bool ended(pid_t pid) {
  const auto stat = read_file(fmt::format("/proc/{}/stat", pid));
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z';
}

struct exposure_watch {
  // `ignore`: a process whose argv is not watched.
  explicit exposure_watch(fs::path dir, std::string needle = "X-Amz-", pid_t ignore = -1)
      : dir_(std::move(dir)), needle_(std::move(needle)), ignore_(std::to_string(ignore)),
        thread_([this] { watch(); }) {}
  ~exposure_watch() { stop(); }
  void stop() {
    running_ = false;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<std::string> found;
  std::size_t files_seen = 0;

 private:
  void watch() {
    while (running_) {
      std::error_code ec;
      for (const auto& p : fs::directory_iterator("/proc", ec)) {
        const auto name = p.path().filename().string();
        if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0])) || name == ignore_) continue;
        // read_file, not an istreambuf_iterator: a process that ends meanwhile fails the read (ESRCH),
        // which the iterator turns into an exception.
        const auto argv = read_file(p.path() / "cmdline");
        if (argv.find(needle_) != std::string::npos) found.push_back("argv of pid " + name);
      }
      for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        std::error_code e;
        if (!it->is_regular_file(e)) continue;
        ++files_seen;
        const auto perms = it->status(e).permissions();
        // Readable by others: the file itself, or no directory on its way shuts them out.
        bool shut = (perms & fs::perms::others_read) == fs::perms::none;
        for (auto up = it->path().parent_path(); !shut && up.string().size() > dir_.string().size();
             up = up.parent_path())
          shut = (fs::status(up, e).permissions() & fs::perms::others_exec) == fs::perms::none;
        if (shut) continue;
        std::ifstream in(it->path(), std::ios::binary);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (text.find(needle_) != std::string::npos) found.push_back("file " + it->path().string());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  fs::path dir_;
  std::string needle_;
  std::string ignore_;
  std::atomic<bool> running_{true};
  std::thread thread_;
};

// Every file under `dir` whose bytes hold `needle`.
std::vector<std::string> files_holding(const fs::path& dir, const std::string& needle) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied)) {
    if (!e.is_regular_file() || e.is_symlink()) continue;
    if (read_file(e.path()).find(needle) != std::string::npos) out.push_back(e.path().string());
  }
  return out;
}

TEST_F(run_cli, env_values_reach_the_command_but_no_trace_no_state_file_and_no_argv) {
  auto o = env();
  // Quotes, a newline, $ and a line that looks like the end of the assignments: all arrive as they are.
  const std::string secret = "s3cr3t-'\"$HOME`x`\nferry-env-end-0\n  tail";
  const auto trace = home_ / "env.jsonl";
  auto child = spawn_ferry({"--trace", trace.string(), "run", "--env", "FERRY_TEST_SECRET=" + secret, "--env",
                            "PLAIN=a b", "--env", "PYTHONPATH=mine", "--", "sh", "-c",
                            "printf '%s|%s|%s' \"$FERRY_TEST_SECRET\" \"$PLAIN\" \"$PYTHONPATH\"; sleep 2"},
                           o);
  // ferry's own argv holds the value until it has parsed it; every other process's, never.
  exposure_watch watch(home_ / "state", "s3cr3t", child->pid());
  // Read until the value is gone or ferry has ended: how soon ferry gets to parse its options depends on the
  // machine's load, not on ferry.
  std::string argv;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(std::chrono::milliseconds(5))) {
    auto now = read_file(fmt::format("/proc/{}/cmdline", child->pid()));
    if (now.empty()) {
      if (ended(child->pid())) break;
      continue;  // between fork and exec, or within exec
    }
    argv = std::move(now);
    if (contains(argv, "FERRY_TEST_SECRET=") && !contains(argv, "s3cr3t")) break;  // ferry's, parsed
  }
  const auto r = child->wait();
  watch.stop();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, secret + "|a b|mine");
  EXPECT_TRUE(contains(argv, "FERRY_TEST_SECRET=")) << argv;
  EXPECT_FALSE(contains(argv, "s3cr3t")) << "ferry's argv still holds the value once parsed";
  EXPECT_TRUE(watch.found.empty()) << fmt::format("{}", fmt::join(watch.found, "\n"));
  EXPECT_FALSE(contains(read_file(trace), "a b")) << "--env PLAIN's value is in the trace";
  const auto holding = files_holding(home_.path(), "s3cr3t");
  EXPECT_TRUE(holding.empty()) << fmt::format("{}", fmt::join(holding, "\n"));

  // --env NAME: the value comes from ferry's environment and never reaches an argv at all.
  o.env["FERRY_TEST_FROM_ENV"] = "from the environment";
  const auto named = run_ferry({"run", "--env", "FERRY_TEST_FROM_ENV", "--", "sh", "-c", "echo \"$FERRY_TEST_FROM_ENV\""},
                               o);
  EXPECT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(named.out, "from the environment\n");
  const auto unset = run_ferry({"run", "--env", "FERRY_TEST_UNSET_VARIABLE", "--", "true"}, o);
  EXPECT_EQ(unset.exit_code, 2);
  EXPECT_TRUE(contains(unset.err, "FERRY_TEST_UNSET_VARIABLE is not set")) << unset.err;
}

TEST_F(run_cli, staging_puts_no_url_in_an_argv_or_in_a_file_others_can_read) {
  auto o = env();
  make_objects(*moto_, home_ / "source", "secret", 40, 1 << 20);
  const auto staged = home_ / "staged";
  fs::create_directories(staged);
  exposure_watch watch(staged);
  const auto whole = run_ferry({"run", "--stage", "s3://ferry-run/secret=" + staged.string(), "--", "true"}, o);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  fs::remove_all(staged);
  fs::create_directories(staged);
  const auto streamed = run_ferry({"run", "--stage", "s3://ferry-run/secret=" + staged.string(), "--stage-window",
                                   "64MiB", "--", "sleep", "1"},
                                  o);
  watch.stop();
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
  EXPECT_GT(watch.files_seen, 0u) << "the watcher never saw a staged file";
  EXPECT_TRUE(watch.found.empty()) << fmt::format("{}", fmt::join(watch.found, "\n"));
}

TEST_F(run_cli, a_staged_object_never_passes_through_a_symlink_out_of_the_node_directory) {
  auto o = env();
  make_objects(*moto_, home_ / "source", "linked", 10, 1000);  // f000 and f005 are under sub/dir/
  const auto staged = home_ / "staged";
  const auto elsewhere = home_ / "elsewhere";
  fs::create_directories(staged);
  fs::create_directories(elsewhere / "dir");
  fs::create_symlink(elsewhere, staged / "sub");
  const auto r = run_ferry({"run", "--stage", "s3://ferry-run/linked=" + staged.string(), "--", "true"}, o);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "sub/dir/f00")) << r.err;
  EXPECT_TRUE(contains(r.err, "symlink")) << r.err;
  EXPECT_TRUE(fs::is_empty(elsewhere / "dir"));
}

TEST_F(run_cli, a_stage_window_streams_every_object_once_in_order_within_the_window) {
  auto o = env();
  constexpr int count = 40;
  constexpr std::size_t size = 10 << 10;
  const auto source = home_ / "source";
  for (int i = 0; i < count; ++i) write_file(source / fmt::format("f{:03}.bin", i), std::string(size, 'a' + i % 26));
  ASSERT_EQ(moto_->aws({"s3", "cp", "--recursive", "--quiet", source.string(), "s3://ferry-run/stream"}).exit_code, 0);
  const auto staged = home_ / "staged";
  const std::uint64_t window = count * size / 4;
  // The reader takes the first file in name order, reads it slowly, deletes it, and ends at the marker.
  write_file(project() / "reader.py",
             "import os, sys, time\n"
             "d = sys.argv[1]\n"
             "while True:\n"
             "    names = sorted(n for n in os.listdir(d) if not n.startswith('.ferry-stage'))\n"
             "    if not names:\n"
             "        if os.path.exists(os.path.join(d, '.ferry-stage-complete')): break\n"
             "        time.sleep(0.01); continue\n"
             "    p = os.path.join(d, names[0])\n"
             "    data = open(p, 'rb').read(); time.sleep(0.02)\n"
             "    os.remove(p)\n"
             "    print(names[0], len(data), flush=True)\n");
  std::atomic<bool> running{true};
  std::atomic<std::uint64_t> most{0};
  std::thread watcher([&] {
    while (running) {
      std::uint64_t held = 0;
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(staged, ec)) {
        if (e.path().filename().string().starts_with(".ferry-stage")) continue;
        std::error_code size_ec;
        const auto n = e.is_regular_file(size_ec) ? e.file_size(size_ec) : 0;
        if (!size_ec) held += n;
      }
      most = std::max<std::uint64_t>(most, held);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  const auto r = run_ferry({"run", "--stage", "s3://ferry-run/stream=" + staged.string(), "--stage-window",
                            std::to_string(window), "--", "/usr/bin/python3", "reader.py", staged.string()},
                           o);
  running = false;
  watcher.join();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string expected;
  for (int i = 0; i < count; ++i) expected += fmt::format("f{:03}.bin {}\n", i, size);
  EXPECT_EQ(r.out, expected);
  EXPECT_GT(most.load(), 0u) << "the watcher never saw a staged file";
  EXPECT_LE(most.load(), window);
}

TEST_F(run_cli, a_stage_order_file_sets_the_order_of_delivery) {
  auto o = env();
  const auto source = home_ / "source";
  for (int i = 0; i < 6; ++i) write_file(source / fmt::format("f{}.bin", i), std::string(1000, 'x'));
  ASSERT_EQ(moto_->aws({"s3", "cp", "--recursive", "--quiet", source.string(), "s3://ferry-run/ordered"}).exit_code, 0);
  write_file(home_ / "order.txt", "f4.bin\nordered/f1.bin\nf5.bin\n");
  const auto staged = home_ / "staged";
  // A window of one object: one file at a time, so the reader sees the delivery order.
  write_file(project() / "reader.py",
             "import os, sys, time\n"
             "d = sys.argv[1]\n"
             "while True:\n"
             "    names = [n for n in os.listdir(d) if not n.startswith('.ferry-stage')]\n"
             "    if not names:\n"
             "        if os.path.exists(os.path.join(d, '.ferry-stage-complete')): break\n"
             "        time.sleep(0.01); continue\n"
             "    os.remove(os.path.join(d, names[0])); print(names[0], flush=True)\n");
  const auto r = run_ferry({"run", "--stage", "s3://ferry-run/ordered=" + staged.string(), "--stage-window", "1000",
                            "--stage-order", (home_ / "order.txt").string(), "--", "/usr/bin/python3", "reader.py",
                            staged.string()},
                           o);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "f4.bin\nf1.bin\nf5.bin\nf0.bin\nf2.bin\nf3.bin\n");
  write_file(home_ / "bad-order.txt", "f1.bin\nnope.bin\n");
  const auto bad = run_ferry({"run", "--stage", "s3://ferry-run/ordered=" + staged.string(), "--stage-order",
                              (home_ / "bad-order.txt").string(), "--", "true"},
                             o);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, "bad-order.txt:2: no object nope.bin")) << bad.err;
}

TEST_F(run_cli, a_full_disk_is_named_and_leaves_nothing_under_a_final_name) {
  auto o = env();
  // A 64 KiB tmpfs as the node's disk, mounted before the node starts so that its mount namespace has it.
  const auto small = home_ / "small";
  fs::create_directories(small);
  ASSERT_EQ(run({"mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", small.string()}).exit_code, 0);
  struct unmount {
    fs::path p;
    ~unmount() { run({"umount", "-l", p.string()}); }
  } cleanup{small};
  write_file(home_ / "big" / "big.bin", std::string(256 << 10, 'x'));
  write_file(home_ / "big" / "small.bin", "s");
  ASSERT_EQ(moto_->aws({"s3", "cp", "--recursive", "--quiet", (home_ / "big").string(), "s3://ferry-run/big"}).exit_code,
            0);
  const auto r = run_ferry({"run", "--stage", "s3://ferry-run/big=" + (small / "data").string(), "--", "true"}, o);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "disk full")) << r.err;
  EXPECT_FALSE(fs::exists(small / "data" / "big.bin"));
  EXPECT_FALSE(fs::exists(small / "data" / "small.bin"));
}

TEST_F(run_cli, bad_staging_requests_are_refused_with_a_reason) {
  auto o = env();
  write_file(home_ / "one" / "big.bin", std::string(64 << 10, 'x'));
  ASSERT_EQ(moto_->aws({"s3", "cp", "--recursive", "--quiet", (home_ / "one").string(), "s3://ferry-run/one"}).exit_code,
            0);
  const auto dir = (home_ / "staged").string();
  const auto empty = run_ferry({"run", "--stage", "s3://ferry-run/nothing-here=" + dir, "--", "true"}, o);
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_TRUE(contains(empty.err, "no objects")) << empty.err;
  const auto small = run_ferry({"run", "--stage", "s3://ferry-run/one=" + dir, "--stage-window", "1KiB", "--", "true"}, o);
  EXPECT_EQ(small.exit_code, 1);
  EXPECT_TRUE(contains(small.err, "smaller than the largest object")) << small.err;
  const auto relative = run_ferry({"run", "--stage", "s3://ferry-run/one=relative/dir", "--", "true"}, o);
  EXPECT_EQ(relative.exit_code, 2);
  EXPECT_TRUE(contains(relative.err, "absolute")) << relative.err;
  // An object that vanishes after listing: the node says which, and nothing is left under its name.
  const auto gone_dir = home_ / "gone";
  write_file(gone_dir / "a.bin", "a");
  write_file(gone_dir / "b.bin", "b");
  ASSERT_EQ(moto_->aws({"s3", "cp", "--recursive", "--quiet", gone_dir.string(), "s3://ferry-run/gone"}).exit_code, 0);
  auto child = spawn_ferry({"run", "--stage", "s3://ferry-run/gone=" + dir + "/gone", "--stage-window", "1",
                            "--", "sh", "-c", "sleep 3; echo command-ended >&2"},
                           o);
  // With a one-byte window b.bin waits for a.bin to be read, which never happens; meanwhile b.bin goes.
  for (int i = 0; i < 400 && !fs::exists(fs::path(dir) / "gone" / "a.bin"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_TRUE(fs::exists(fs::path(dir) / "gone" / "a.bin"));
  ASSERT_EQ(moto_->aws({"s3", "rm", "s3://ferry-run/gone/b.bin"}).exit_code, 0);
  fs::remove(fs::path(dir) / "gone" / "a.bin");
  const auto gone = child->wait();
  EXPECT_EQ(gone.exit_code, 1) << gone.err;
  EXPECT_TRUE(contains(gone.err, "b.bin")) << gone.err;
  // Said while the command still ran, not only once it had ended.
  const auto said = gone.err.find("failed while the command runs");
  ASSERT_NE(said, std::string::npos) << gone.err;
  const auto ended = gone.err.find("command-ended");
  ASSERT_NE(ended, std::string::npos) << gone.err;
  EXPECT_LT(said, ended) << gone.err;
  EXPECT_FALSE(fs::exists(fs::path(dir) / "gone" / "b.bin"));
}

TEST_F(run_cli, run_and_map_on_ec2_nodes_from_moto) {
  auto o = env();
  const auto key_dir = home_ / "config" / "ferry";
  fs::create_directories(key_dir);
  ASSERT_EQ(run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ferry", "-f", (key_dir / "id_ed25519").string()})
                .exit_code, 0);
  const auto subnet_id = make_ec2_subnet(*moto_);
  ASSERT_FALSE(subnet_id.empty());
  use_ec2_provider(o.env, subnet_id);
  instance_harness harness(*moto_, home_ / "instances", read_file(key_dir / "id_ed25519.pub"));

  const auto r = run_ferry({"run", "--nodes", "2", "--", "python3", "main.py"}, o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, " | from-app from-venv []")) << r.out;
  EXPECT_TRUE(contains(r.err, "(2 new)")) << r.err;
  const auto m = run_ferry({"map", "--range", "1..6", "--", "python3", "main.py", "{}"}, o);
  EXPECT_EQ(m.exit_code, 0) << m.err;
  EXPECT_TRUE(contains(m.err, "6 tasks: 6 done")) << m.err;
  EXPECT_TRUE(contains(m.err, "(warm)")) << m.err;
  EXPECT_EQ(run_ferry({"nodes", "down", "--all"}, o).exit_code, 0);
}

}  // namespace
}  // namespace ferry::test
