// Materialising a run's layers on a node, end to end: materialise() against a real sshd (its commands run
// here, so the node's cache is a temporary directory) whose PATH holds no curl, unzip, sha256sum, flock or
// python3, and a real moto_server holding the zips behind presigned URLs. The node program (ferry-node,
// the static build) is sent over SSH on first use.
#include "agent/error.hpp"
#include "agent/materialise/materialise.hpp"
#include "agent/materialise/peer_serve.hpp"
#include "agent/node/error.hpp"
#include "agent/materialise/stage.hpp"
#include "net/aws_profile.hpp"
#include "net/digest.hpp"
#include "net/error.hpp"
#include "net/run_all.hpp"
#include "net/ssh_exec.hpp"
#include "net/ssh_node_link.hpp"
#include "net/s3_session.hpp"
#include "packaging/entries_id.hpp"
#include "packaging/layer.hpp"
#include "support/eliot.hpp"
#include "support/fault_proxy.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/random_bytes.hpp"
#include "tracing/action_types.hpp"

#include "../net/ssh_harness.hpp"
#include "zip_fixture.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <csignal>
#include <optional>
#include <random>
#include <sstream>
#include <sys/mount.h>
#include <sys/stat.h>
#include <thread>

namespace ferry::agent {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
namespace test_zip = node::test_zip;

std::shared_ptr<const node_program> the_program() {
  diagnostics diag;
  auto p = shared_node_program(FERRY_NODE_PROGRAM, diag);
  if (!p) throw std::runtime_error(diag.message);
  return *p;
}

materialise_options test_options() {
  materialise_options o;
  o.limits.connect_timeout_ms = 5000;
  o.limits.read_timeout_ms = 60000;
  o.limits.attempts = 2;
  o.limits.retry_base_ms = 10;
  o.limits.retry_max_ms = 50;
  o.limits.lock_timeout_ms = 60000;
  o.limits.parallelism = 3;
  o.limits.range_size = 256 << 10;  // small, so the tests' shards over 1 MiB come in several ranges
  o.program = the_program();
  return o;
}

const std::string hex64 = std::string(64, 'a');

// ---------------------------------------------------------------------------------------------------------
// On a node: a real sshd on this machine, and moto holding the zips.

struct file_spec {
  std::string path;
  std::string content;
  fs::perms mode = fs::perms(0644);
  std::string link;  // non-empty: a symlink to this
};

using test::random_bytes;

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

// Public members: the tests' coroutines are free functions that reach into their fixture.
class materialise_node : public net::ssh_harness {
 public:
  static void SetUpTestSuite() {
    moto_ = new test::moto_server();
    moto_->make_bucket(bucket);
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }

  materialise_node() {
    authorize(server);
    settings_ = test::default_settings(dir.path());
    settings_.storage.endpoint = moto_->endpoint();
    std::map<std::string, std::string, std::less<>> vars;
    for (const auto& [name, value] : moto_->environment()) vars[name] = value;
    diagnostics diag;
    auto opened = net::open_s3_session(io.get_executor(), cpu_, settings_, net::map_environment(vars), diag);
    if (!opened) throw std::runtime_error(diag.message);
    s3_ = std::move(*opened);
    prefix_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  static constexpr const char* bucket = "layers";

  // A zip of `files`, made by Info-ZIP's zip from a real tree (modes and symlinks as it stores them), in
  // path order and without directory entries, as ferry's own zips are.
  std::string zip_of(const std::vector<file_spec>& files) {
    const auto tree = dir / fmt::format("tree-{}", ++zips_);
    fs::create_directories(tree);
    for (const auto& f : files) {
      const auto p = tree / f.path;
      fs::create_directories(p.parent_path());
      if (!f.link.empty()) {
        fs::create_symlink(f.link, p);
        continue;
      }
      std::ofstream(p, std::ios::binary) << f.content;
      fs::permissions(p, f.mode);
    }
    const auto out = dir / fmt::format("zip-{}.zip", zips_);
    if (files.empty()) {
      auto r = test::run({test::system_python, "-c", "import sys, zipfile; zipfile.ZipFile(sys.argv[1], 'w').close()",
                          out.string()});
      if (r.exit_code != 0) throw std::runtime_error(r.err);
    } else {
      test::process_options o;
      o.cwd = tree;
      std::vector<std::string> argv = {"zip", "-qyD", "-nw", out.string()};
      for (const auto& f : sorted(files)) argv.push_back(f.path);
      auto r = test::run(argv, o);
      if (r.exit_code != 0) throw std::runtime_error(r.out + r.err);
    }
    return test::read_file(out);
  }

  static std::vector<file_spec> sorted(std::vector<file_spec> files) {
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    return files;
  }

  // The id a workstation gives a shard of `files` (packaging/layer.hpp): what a node checks it against.
  static std::string shard_id_of(const std::vector<file_spec>& files) {
    std::vector<packaging::file_entry> entries;
    for (const auto& f : sorted(files)) {
      packaging::file_entry e;
      e.path = f.path;
      e.type = f.link.empty() ? packaging::file_entry::kind::regular : packaging::file_entry::kind::symlink;
      e.permissions = f.link.empty() ? static_cast<std::uint32_t>(f.mode) : 0777;
      e.digest = net::sha256(f.link.empty() ? f.content : f.link);
      entries.push_back(std::move(e));
    }
    return net::to_hex(packaging::entries_id(entries));
  }

  // Stores `zip` in moto and describes it as a shard: a presigned URL, its digest and size, and what the
  // manifest would say it holds (`files` entries of `content` bytes).
  shard_source store(const std::string& key, const std::string& zip, std::uint64_t files = 0,
                     std::uint64_t content = 0) {
    diagnostics diag;
    auto put = run([](materialise_node& t, std::string k, const std::string& bytes,
                      diagnostics& d) -> asio::awaitable<result<std::string>> {
      net::request_body body = std::span<const char>(bytes.data(), bytes.size());
      const std::string b = bucket;
      co_return co_await t.s3_->s3->put_object(t.trace.root(), b, k, std::move(body), d);
    }(*this, key, zip, diag));
    if (!put) throw std::runtime_error(diag.message);
    return {s3_->s3->presign_get(bucket, key), net::hex_sha256(zip), zip.size(), files, content, hex64, key};
  }

  // A layer of one shard per group of files; its id is made up from the test, name and contents.
  layer_source layer(const std::string& name, const std::vector<std::vector<file_spec>>& shards) {
    layer_source l;
    l.name = name;
    std::string seed = prefix_ + "/" + name;
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const auto zip = zip_of(shards[i]);
      std::uint64_t content = 0;
      for (const auto& f : shards[i]) content += f.link.empty() ? f.content.size() : f.link.size();
      l.shards.push_back(store(fmt::format("{}/{}-{}.zip", prefix_, name, i), zip, shards[i].size(), content));
      l.shards.back().id = shard_id_of(shards[i]);
      seed += l.shards.back().sha256;
    }
    l.id = net::hex_sha256(seed);
    return l;
  }

  environment_plan plan_of(std::vector<layer_source> layers, std::optional<std::size_t> workspace = {}) const {
    environment_plan plan;
    plan.layers = std::move(layers);
    plan.workspace = workspace;
    plan.cache_dir = cache().string();
    return plan;
  }

  fs::path cache() const { return dir / "node-cache"; }
  fs::path layer_dir(const layer_source& l) const { return cache() / "layers" / l.id; }
  fs::path marker(const layer_source& l) const { return cache() / "layers" / (l.id + ".done"); }

  // Connects to `server` and materialises `plan` there.
  asio::awaitable<result<environment>> materialise_on(const environment_plan& plan, const materialise_options& o,
                                                      diagnostics& diag) {
    auto session = co_await connect(server, diag);
    if (!session) co_return session.error();
    net::ssh_node_link link(*session);
    auto r = co_await materialise(trace.root(), link, plan, o, diag);
    (*session)->close();
    co_return r;
  }

  asio::awaitable<result<environment>> materialise_fed(layer_feed& feed, const materialise_options& o,
                                                       diagnostics& diag) {
    auto session = co_await connect(server, diag);
    if (!session) co_return session.error();
    net::ssh_node_link link(*session);
    auto r = co_await materialise(trace.root(), link, feed, o, diag);
    (*session)->close();
    co_return r;
  }

  // The node's PATH: only what the node program's installation uses. No curl, unzip, sha256sum, flock or
  // python3.
  materialise_options bare_options() {
    auto o = test_options();
    o.node_path = bin_with({"mkdir", "cat", "chmod", "rm"}).string();
    return o;
  }

  result<environment> materialise_now(const environment_plan& plan, diagnostics& diag) {
    return run(materialise_on(plan, bare_options(), diag));
  }
  result<environment> materialise_now(const environment_plan& plan, diagnostics& diag, const materialise_options& o) {
    return run(materialise_on(plan, o, diag));
  }

  // Runs a shell line on the node; its stderr when it fails, else "".
  std::string on_node(const std::string& command) {
    diagnostics diag;
    auto outcome = run([](materialise_node& t, std::string line, diagnostics& d) -> asio::awaitable<std::string> {
      auto session = co_await t.connect(t.server, d);
      if (!session) co_return d.message;
      net::collect_sink out;
      net::exec_request request{line, nullptr, &out};
      auto done = co_await net::exec(t.trace.root(), **session, request, d);
      (*session)->close();
      if (!done) co_return d.message;
      co_return done->success() ? std::string() : done->describe() + ": " + out.err;
    }(*this, command, diag));
    return outcome;
  }

  // ferry's trace and the node program's own files beside it, as one text.
  std::string all_traces() {
    std::string text = trace_text();
    for (const auto& e : fs::directory_iterator(dir.path())) {
      const auto name = e.path().filename().string();
      if (name.starts_with("trace.node-") && name.ends_with(".jsonl")) text += test::read_file(e.path());
    }
    return text;
  }
  std::vector<fs::path> trace_files() {
    std::vector<fs::path> files = {trace.file()};
    for (const auto& e : fs::directory_iterator(dir.path())) {
      const auto name = e.path().filename().string();
      if (name.starts_with("trace.node-") && name.ends_with(".jsonl")) files.push_back(e.path());
    }
    return files;
  }

  // GET requests moto served for keys of this test that contain `part`.
  std::size_t gets_of(const std::string& part) const {
    std::istringstream log(moto_->log());
    std::size_t n = 0;
    const auto needle = fmt::format("\"GET /{}/{}/", bucket, prefix_);
    for (std::string line; std::getline(log, line);) {
      if (line.find(needle) != std::string::npos && line.find(part) != std::string::npos) ++n;
    }
    return n;
  }

  // Every entry of the cache's layers and downloads directories that is neither a layer nor a marker.
  std::vector<std::string> leftovers() const {
    std::vector<std::string> out;
    if (!fs::exists(cache() / "layers")) return out;
    for (const auto& e : fs::directory_iterator(cache() / "layers")) {
      const auto name = e.path().filename().string();
      if (name.find(".tmp.") != std::string::npos || name.find(".done.") != std::string::npos) out.push_back(name);
    }
    return out;
  }

  // The end messages (or start messages, for actions that never ended) of actions of `type`.
  std::vector<json::object> actions(std::string_view type) {
    std::vector<json::object> out;
    std::istringstream in(all_traces());
    for (std::string line; std::getline(in, line);) {
      auto message = json::parse(line).as_object();
      const auto* t = message.if_contains("action_type");
      if (!t || t->as_string() != type) continue;
      if (message.at("action_status").as_string() != "started") out.push_back(std::move(message));
    }
    return out;
  }

  // The node field of the first start message of an action of `type`.
  std::string started_with_node(std::string_view type) {
    std::istringstream in(trace_text());
    for (std::string line; std::getline(in, line);) {
      auto message = json::parse(line).as_object();
      const auto* t = message.if_contains("action_type");
      if (t && t->as_string() == type && message.at("action_status").as_string() == "started")
        return message.contains("node") ? std::string(message.at("node").as_string()) : "";
    }
    return "";
  }

  std::size_t count_status(std::string_view type, std::string_view status) {
    std::size_t n = 0;
    for (const auto& a : actions(type)) n += a.at("action_status").as_string() == status;
    return n;
  }

  // A directory of symlinks to the tools named, for a PATH that holds only them.
  fs::path bin_with(const std::vector<std::string>& tools) {
    const auto bin = dir / fmt::format("bin-{}", ++bins_);
    fs::create_directories(bin);
    for (const auto& t : tools) {
      const fs::path target = t == "python3" ? fs::path(test::system_python) : fs::path("/usr/bin") / t;
      const auto found = fs::exists(target) ? target : fs::path("/bin") / t;
      if (!fs::exists(found)) throw std::runtime_error("no " + t + " on this machine");
      fs::create_symlink(found, bin / t);
    }
    return bin;
  }

  static test::moto_server* moto_;
  test::sshd_server server;
  net::cpu_pool cpu_{1};
  config::settings settings_;
  std::optional<net::s3_session> s3_;
  std::string prefix_;
  int zips_ = 0;
  int bins_ = 0;
};

test::moto_server* materialise_node::moto_ = nullptr;

std::vector<std::vector<file_spec>> workspace_files() {
  return {{{"main.py", "print('hello')\n"},
           {"run.sh", "#!/bin/sh\necho run\n", fs::perms(0755)},
           {"secret.txt", "key\n", fs::perms(0600)},
           {"pkg/__init__.py", "X = 1\n"},
           {"pkg/link.py", "", fs::perms(0644), "../main.py"}}};
}

std::vector<std::vector<file_spec>> two_shards() {
  return {{{"alpha/__init__.py", "A = 1\n"}, {"alpha/data.bin", random_bytes(100000, 1)}},
          {{"alpha/tool", "#!/bin/sh\n", fs::perms(0750)}, {"alpha-1.0.dist-info/RECORD", "alpha/__init__.py,,\n"}}};
}

void expect_workspace(const fs::path& ws) {
  EXPECT_EQ(test::read_file(ws / "main.py"), "print('hello')\n");
  EXPECT_EQ(mode_of(ws / "main.py"), 0644u);
  EXPECT_EQ(mode_of(ws / "run.sh"), 0755u);
  EXPECT_EQ(mode_of(ws / "secret.txt"), 0600u);
  EXPECT_EQ(test::read_file(ws / "pkg" / "__init__.py"), "X = 1\n");
  ASSERT_TRUE(fs::is_symlink(ws / "pkg" / "link.py"));
  EXPECT_EQ(fs::read_symlink(ws / "pkg" / "link.py"), "../main.py");
}

TEST_F(materialise_node, fetches_every_layer_once_then_finds_them_all_cached) {
  const std::vector<layer_source> layers = {layer("workspace", workspace_files()), layer("alpha", two_shards()),
                                            layer_source{net::hex_sha256(prefix_ + "none"), "no-shards", {}},
                                            layer("empty", {{}})};
  const auto plan = plan_of(layers, 0);
  diagnostics diag;
  auto first = materialise_now(plan, diag);
  ASSERT_TRUE(first) << diag.message << server.log();
  EXPECT_EQ(first->layers_fetched, 4u);
  EXPECT_EQ(first->layers_cached, 0u);
  std::uint64_t zip_bytes = 0;
  for (const auto& l : layers)
    for (const auto& s : l.shards) zip_bytes += s.bytes;
  EXPECT_EQ(first->bytes_fetched, zip_bytes);
  EXPECT_EQ(first->workdir, layer_dir(layers[0]).string());
  ASSERT_EQ(first->python_path.size(), 4u);
  for (std::size_t i = 0; i < layers.size(); ++i) EXPECT_EQ(first->python_path[i], layer_dir(layers[i]).string());

  expect_workspace(layer_dir(layers[0]));
  const auto alpha = layer_dir(layers[1]);
  EXPECT_EQ(test::read_file(alpha / "alpha" / "data.bin"), random_bytes(100000, 1));
  EXPECT_EQ(mode_of(alpha / "alpha" / "tool"), 0750u);
  EXPECT_TRUE(fs::exists(alpha / "alpha-1.0.dist-info" / "RECORD"));
  for (const auto& l : layers) {
    EXPECT_TRUE(fs::is_directory(layer_dir(l))) << l.name;
    EXPECT_TRUE(fs::exists(marker(l))) << l.name;
  }
  EXPECT_TRUE(fs::is_empty(layer_dir(layers[2])));
  EXPECT_TRUE(fs::is_empty(layer_dir(layers[3])));
  EXPECT_GT(std::stoull(test::read_file(marker(layers[1]))), 100000u);  // the size on disk
  EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
  const auto gets = gets_of(".zip");
  EXPECT_EQ(gets, 4u) << moto_->log();

  // The program went to the node once, under its digest, and the node's steps are real actions.
  EXPECT_EQ(count_status(action_types::node::install, "succeeded"), 1u);
  EXPECT_TRUE(fs::exists(cache() / "bin" / ("ferry-node-" + the_program()->sha256)));
  EXPECT_EQ(count_status(action_types::agent::materialise, "succeeded"), 1u);
  EXPECT_EQ(count_status(action_types::node::materialise, "succeeded"), 1u);
  EXPECT_EQ(count_status(action_types::node::layer, "succeeded"), 4u);
  EXPECT_EQ(count_status(action_types::node::shard, "succeeded"), 4u);
  EXPECT_EQ(started_with_node(action_types::agent::materialise), "node-1");
  // No URL, signature or plan reaches any trace.
  EXPECT_EQ(all_traces().find("X-Amz-Signature"), std::string::npos);

  // Again: nothing is downloaded or sent, and the markers were touched.
  const auto touched_before = fs::last_write_time(marker(layers[1]));
  auto second = materialise_now(plan, diag);
  ASSERT_TRUE(second) << diag.message;
  EXPECT_EQ(second->layers_fetched, 0u);
  EXPECT_EQ(second->layers_cached, 4u);
  EXPECT_EQ(second->bytes_fetched, 0u);
  EXPECT_EQ(second->python_path, first->python_path);
  EXPECT_EQ(second->workdir, first->workdir);
  EXPECT_EQ(gets_of(".zip"), gets);
  EXPECT_GE(fs::last_write_time(marker(layers[1])), touched_before);
  EXPECT_EQ(count_status(action_types::node::install, "succeeded"), 1u);
  EXPECT_EQ(count_status(action_types::node::shard, "succeeded"), 4u);
  EXPECT_EQ(count_status(action_types::node::layer, "succeeded"), 8u);
  std::size_t cached = 0;
  for (const auto& a : actions(action_types::node::layer)) cached += a.contains("cached") && a.at("cached").as_bool();
  EXPECT_EQ(cached, 4u);
  // eliot rebuilds one complete tree from ferry's file and the node program's files.
  trace.root().succeed();
  trace_text();
  const auto files = trace_files();
  EXPECT_EQ(files.size(), 3u);
  const auto tasks = test::eliot_parse(files);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].at("complete").as_bool());
}

// Feeds `first`, waits (up to a minute) until the node has made it, then feeds `second` and ends the
// plan. True when the first layer was there before the plan ended.
asio::awaitable<bool> feed_one_then_the_rest(materialise_node& t, layer_feed& feed, const layer_source& first,
                                             const layer_source& second) {
  co_await net::accept_cancellation();
  feed.add(1, first);  // places in the plan need not come in order
  asio::steady_timer timer(co_await asio::this_coro::executor);
  bool early = false;
  for (int i = 0; i < 3000 && !early; ++i) {
    early = fs::exists(t.marker(first));
    timer.expires_after(20ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
  feed.add(0, second);
  feed.end(2, 0);
  co_return early;
}

// What feeds a feed beside a materialise, and whether the node was early (the feeder's own test).
using feeder = std::function<asio::awaitable<bool>(layer_feed&)>;

// Materialises from a feed while `feeding` feeds it; the feeder's answer and the outcome.
asio::awaitable<std::pair<bool, result<environment>>> fed_by(materialise_node& t, const materialise_options& opts,
                                                            feeder feeding, diagnostics& d) {
  layer_feed feed(co_await asio::this_coro::executor);
  bool early = false;
  result<environment> env = make_error_code(errc::materialise_failed);
  std::vector<asio::awaitable<void>> both;
  both.push_back([](materialise_node& tt, layer_feed& f, const materialise_options& op, result<environment>& out,
                    diagnostics& dd) -> asio::awaitable<void> {
    co_await net::accept_cancellation();
    out = co_await tt.materialise_fed(f, op, dd);
  }(t, feed, opts, env, d));
  both.push_back([](layer_feed& f, feeder feed_it, bool& out) -> asio::awaitable<void> {
    out = co_await feed_it(f);
  }(feed, std::move(feeding), early));
  co_await net::run_all(std::move(both));
  co_return std::pair<bool, result<environment>>{early, std::move(env)};
}

TEST_F(materialise_node, each_layer_is_made_as_soon_as_it_is_fed_before_the_plan_ends) {
  const auto first = layer("first", {{{"f.py", "F = 1\n"}}});
  const auto second = layer("workspace", workspace_files());
  auto o = bare_options();
  o.cache_dir = cache().string();
  diagnostics diag;
  auto [early, env] = run(fed_by(
      *this, o, [&](layer_feed& f) { return feed_one_then_the_rest(*this, f, first, second); }, diag));
  const bool made = env.has_value() && env->python_path.size() == 2 && env->workdir == layer_dir(second).string() &&
                    env->python_path[1] == layer_dir(first).string();
  const std::pair<bool, bool> outcome{early, made};
  EXPECT_TRUE(outcome.first) << "the first layer was not made before the plan ended";
  EXPECT_TRUE(outcome.second) << diag.message;
  expect_workspace(layer_dir(second));
}

// A plan that stops short (the pack failed) fails the node program, and leaves no half-made layer.
TEST_F(materialise_node, a_plan_that_stops_short_fails_and_leaves_nothing_half_made) {
  const auto first = layer("first", {{{"f.py", "F = 1\n"}}});
  auto o = bare_options();
  o.cache_dir = cache().string();
  diagnostics diag;
  auto r = run([](materialise_node& t, const layer_source& a, const materialise_options& opts,
                  diagnostics& d) -> asio::awaitable<result<environment>> {
    layer_feed feed(co_await asio::this_coro::executor);
    feed.add(0, a);
    feed.abandon();
    co_return co_await t.materialise_fed(feed, opts, d);
  }(*this, first, o, diag));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), node::errc::bad_plan) << diag.message;
  EXPECT_NE(diag.message.find("the plan ended before its end line"), std::string::npos) << diag.message;
  EXPECT_TRUE(leftovers().empty());
}

// The layer as ferry sends it at its first stored shard: the later shards without URL, digest or size
// (agent/node/plan.hpp), each to come in a shard line.
layer_source first_shard_only(const layer_source& whole) {
  auto l = whole;
  for (std::size_t i = 1; i < l.shards.size(); ++i) {
    l.shards[i].url.clear();
    l.shards[i].sha256.clear();
    l.shards[i].bytes = 0;
  }
  return l;
}

// Whether a file named `name` is in a temporary directory of the layer: the node has inflated it there.
bool in_temp(const fs::path& layers, const std::string& id, const std::string& name) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(layers, ec)) {
    if (e.path().filename().string().starts_with(id + ".tmp.") && fs::exists(e.path() / name)) return true;
  }
  return false;
}

// Feeds `layer` with only its first shard stored and waits (up to a minute) until the node has inflated
// `first_file` (of that shard) into the layer's temporary directory; then, with `rest`, feeds the other
// shards' lines and ends the plan, else abandons it (the pack failed). True when the node had the first
// shard before any other was fed.
asio::awaitable<bool> feed_shard_by_shard(materialise_node& t, layer_feed& feed, const layer_source& layer,
                                          std::string first_file, bool rest) {
  co_await net::accept_cancellation();
  feed.add(0, first_shard_only(layer));
  asio::steady_timer timer(co_await asio::this_coro::executor);
  bool early = false;
  for (int i = 0; i < 3000 && !early; ++i) {
    early = in_temp(t.cache() / "layers", layer.id, first_file) && !fs::exists(t.marker(layer));
    timer.expires_after(20ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
  if (!rest) {
    feed.abandon();
    co_return early;
  }
  for (std::size_t i = 1; i < layer.shards.size(); ++i) {
    const auto& s = layer.shards[i];
    feed.add_shard({layer.id, i, s.url, s.sha256, s.bytes});
  }
  feed.end(1, 0);
  co_return early;
}

// A layer of three shards whose line came with only its first one stored: the node inflates that one
// while the others are still to come, fetches each as its shard line arrives, and puts the layer in place
// whole once all three passed.
TEST_F(materialise_node, a_layer_fed_shard_by_shard_starts_on_its_first_shard_and_lands_once_all_passed) {
  const auto big = layer("workspace", {{{"a.py", "A = 1\n"}}, {{"b.bin", random_bytes(200 << 10, 5)}},
                                       {{"c/d.py", "D = 4\n"}}});
  auto o = bare_options();
  o.cache_dir = cache().string();
  diagnostics diag;
  auto [early, env] = run(fed_by(*this, o, [&](layer_feed& f) { return feed_shard_by_shard(*this, f, big, "a.py", true); }, diag));
  EXPECT_TRUE(early) << "the node did not start on the first shard before the others were stored";
  ASSERT_TRUE(env) << diag.message;
  EXPECT_EQ(env->workdir, layer_dir(big).string());
  EXPECT_TRUE(fs::exists(marker(big)));
  EXPECT_EQ(test::read_file(layer_dir(big) / "c" / "d.py"), "D = 4\n");
  EXPECT_EQ(fs::file_size(layer_dir(big) / "b.bin"), 200u << 10);
  EXPECT_EQ(count_status(action_types::node::shard, "succeeded"), 3u);
  EXPECT_EQ(count_status(action_types::node::layer, "succeeded"), 1u);
  EXPECT_TRUE(leftovers().empty());
}

// The pack fails after a layer's first shard was stored and inflated on the node: the plan stops short,
// the shards still to come are not waited for, and nothing of the layer stays, in place or half-made.
TEST_F(materialise_node, a_plan_that_stops_before_a_layers_last_shard_leaves_nothing_of_it) {
  const auto big = layer("workspace", {{{"a.py", "A = 1\n"}}, {{"b.py", "B = 2\n"}}});
  auto o = bare_options();
  o.cache_dir = cache().string();
  diagnostics diag;
  auto [early, env] = run(fed_by(*this, o, [&](layer_feed& f) { return feed_shard_by_shard(*this, f, big, "a.py", false); }, diag));
  EXPECT_TRUE(early) << "the node did not start on the first shard";
  ASSERT_FALSE(env);
  EXPECT_EQ(env.error(), node::errc::bad_plan) << diag.message;
  EXPECT_NE(diag.message.find("the plan ended before its end line"), std::string::npos) << diag.message;
  EXPECT_FALSE(fs::exists(layer_dir(big)));
  EXPECT_FALSE(fs::exists(marker(big)));
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(materialise_node, a_copy_of_the_program_that_does_not_match_its_digest_is_never_put_in_place) {
  auto o = bare_options();
  auto wrong = std::make_shared<node_program>(*the_program());
  wrong->sha256 = std::string(64, '0');
  o.program = wrong;
  diagnostics diag;
  auto r = materialise_now(plan_of({layer("alpha", two_shards())}), diag, o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::node_lacks_tools) << diag.message;
  EXPECT_NE(diag.message.find("not " + std::string(64, '0')), std::string::npos) << diag.message;
  EXPECT_TRUE(!fs::exists(cache() / "bin") || fs::is_empty(cache() / "bin"));
}

// The plan goes through stdin: far larger than one argument may be (128 KiB on Linux), it still arrives
// whole. Its layers are cached already (made here), so their URLs are never fetched.
TEST_F(materialise_node, a_large_plan_travels_on_stdin) {
  environment_plan plan = plan_of({});
  const std::string long_url = "http://127.0.0.1:9/never/fetched?" + std::string(400, 'q');
  for (int i = 0; i < 1000; ++i) {
    layer_source l{net::hex_sha256(fmt::format("{}/{}", prefix_, i)), fmt::format("layer-{}", i),
                   {{long_url, hex64, 100, 0, 0, hex64}}};
    fs::create_directories(layer_dir(l));
    std::ofstream(marker(l)) << "4096\n";
    plan.layers.push_back(std::move(l));
  }
  ASSERT_GT(node::plan_lines(plan).size(), 400000u);
  diagnostics diag;
  auto r = materialise_now(plan, diag);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->layers_cached, 1000u);
  EXPECT_EQ(r->layers_fetched, 0u);
  ASSERT_EQ(r->python_path.size(), 1000u);
  EXPECT_EQ(r->python_path[999], layer_dir(plan.layers[999]).string());
}

TEST_F(materialise_node, without_a_workspace_the_workdir_is_an_empty_directory_of_the_cache) {
  const auto plan = plan_of({layer("alpha", two_shards())});
  diagnostics diag;
  auto r = materialise_now(plan, diag);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->workdir, (cache() / "empty").string());
  EXPECT_TRUE(fs::is_directory(r->workdir));
  EXPECT_TRUE(fs::is_empty(r->workdir));
}

TEST_F(materialise_node, names_arrive_byte_for_byte_where_unzip_would_change_them) {
  const auto ws = layer("workspace", {{{"new\nline", "n"}, {"data", "plain"}, {"data;1", "versioned"},
                                       {"caf\xc3\xa9.py", "utf8"}}});
  diagnostics diag;
  auto r = materialise_now(plan_of({ws}, 0), diag);
  ASSERT_TRUE(r) << diag.message;
  const fs::path w = r->workdir;
  EXPECT_EQ(test::read_file(w / "new\nline"), "n");
  EXPECT_EQ(test::read_file(w / "data"), "plain");
  EXPECT_EQ(test::read_file(w / "data;1"), "versioned");
  EXPECT_EQ(test::read_file(w / "caf\xc3\xa9.py"), "utf8");
}

TEST_F(materialise_node, a_symlink_in_one_shard_cannot_carry_the_next_shard_outside_the_layer) {
  const auto outside = dir / "outside";
  fs::create_directories(outside);
  // Shard 0 holds `a`, a link leaving the layer; shard 1 writes through it. Either is refused, whichever
  // the node reaches first.
  auto hostile = layer("hostile", {{{"a", "", fs::perms(0644), outside.string()}}, {{"a/escaped", "payload"}}});
  diagnostics diag;
  auto r = materialise_now(plan_of({hostile}), diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), node::errc::hostile_entry) << diag.message;
  EXPECT_NE(diag.message.find("layer hostile"), std::string::npos) << diag.message;
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_FALSE(fs::exists(marker(hostile)));
  EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
  // A link that stays inside may be there, but no entry passes through it: with one shard at a time,
  // shard 0's link is in place when shard 1 comes.
  auto through = layer("through", {{{"lib", "", fs::perms(0644), "pkg"}}, {{"lib/x", "payload"}}});
  auto o = bare_options();
  o.limits.parallelism = 1;
  r = materialise_now(plan_of({through}), diag, o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), node::errc::hostile_entry) << diag.message;
  EXPECT_NE(diag.message.find("layer through holds the entry 'lib/"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("which passes through a symlink"), std::string::npos) << diag.message;
}

TEST_F(materialise_node, a_shard_larger_than_its_manifest_says_is_refused_before_it_is_extracted) {
  auto bomb = layer("bomb", {{{"zeros", std::string(4 << 20, '\0')}}});
  bomb.shards[0].content = 1000;  // what the manifest says
  diagnostics diag;
  auto r = materialise_now(plan_of({bomb}), diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), node::errc::over_manifest) << diag.message;
  EXPECT_NE(diag.message.find("layer bomb (" + bomb.id.substr(0, 12) + ", shard 1 of 1) holds 1 files of 4194304 bytes"),
            std::string::npos)
      << diag.message;
  EXPECT_FALSE(fs::exists(marker(bomb)));
  EXPECT_TRUE(leftovers().empty());
  // The cap holds whatever the manifest says.
  auto capped = layer("capped", {{{"zeros", std::string(4 << 20, '\0')}}});
  auto o = bare_options();
  o.limits.max_shard_content = 1 << 20;
  r = materialise_now(plan_of({capped}), diag, o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), node::errc::over_manifest) << diag.message;
  EXPECT_NE(diag.message.find("agent.max_shard_content"), std::string::npos) << diag.message;
}

TEST_F(materialise_node, a_corrupt_digest_fails_naming_the_layer_and_leaves_nothing) {
  auto good = layer("workspace", workspace_files());
  auto bad = layer("numpy", two_shards());
  const auto wrong = std::string(64, 'e');
  const auto right = bad.shards[1].sha256;
  bad.shards[1].sha256 = wrong;
  diagnostics diag;
  auto r = materialise_now(plan_of({good, bad}, 0), diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), node::errc::digest_mismatch) << diag.message;
  EXPECT_NE(diag.message.find("node-1"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("layer numpy (" + bad.id.substr(0, 12) + ", shard 2 of 2)"), std::string::npos)
      << diag.message;
  EXPECT_NE(diag.message.find(wrong), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find(right), std::string::npos) << diag.message;
  EXPECT_FALSE(fs::exists(layer_dir(bad)));
  EXPECT_FALSE(fs::exists(marker(bad)));
  EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
  // The other layer is whole and kept for the next run; the bad one was tried twice (options: 2 attempts).
  EXPECT_TRUE(fs::exists(marker(good)));
  EXPECT_EQ(count_status(action_types::node::attempt, "failed"), 2u);
  EXPECT_EQ(count_status(action_types::node::layer, "failed"), 1u);
  EXPECT_EQ(count_status(action_types::agent::materialise, "failed"), 1u);
}

// The zip's digest in the plan comes from the manifest, which storage holds: here it is the digest of the
// zip as stored (a manifest edited to match). What decides is the shard id, which the workstation
// computed from its own files: other content, or the same content under another mode, is refused at
// once (no second attempt), naming the layer, the shard and the key, and nothing of it is kept. Through
// both ways a shard comes: whole, and in ranges.
TEST_F(materialise_node, a_shard_whose_entries_are_not_the_packed_ones_is_refused_whatever_its_digest_says) {
  const std::vector<file_spec> packed = {{"main.py", "print('hello')\n"}, {"big.bin", random_bytes(2 << 20, 31)}};
  auto foreign = layer("workspace", {{{"main.py", "import os\n"}, {"big.bin", random_bytes(2 << 20, 31)}}});
  foreign.shards[0].id = shard_id_of(packed);
  auto small = layer("small", {{{"run.sh", "#!/bin/sh\n", fs::perms(0755)}}});
  small.shards[0].id = shard_id_of({{"run.sh", "#!/bin/sh\n", fs::perms(0644)}});
  for (const auto& l : {foreign, small}) {
    diagnostics diag;
    auto r = materialise_now(plan_of({l}, 0), diag);
    ASSERT_FALSE(r) << l.name;
    EXPECT_EQ(r.error(), node::errc::not_packed) << diag.message;
    EXPECT_NE(diag.message.find(fmt::format("layer {} ({}, shard 1 of 1): the object in storage at {} does not match "
                                            "what this workstation packed",
                                            l.name, l.id.substr(0, 12), l.shards[0].key)),
              std::string::npos)
        << diag.message;
    EXPECT_FALSE(fs::exists(layer_dir(l)));
    EXPECT_FALSE(fs::exists(marker(l)));
    EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
  }
  EXPECT_EQ(count_status(action_types::node::attempt, "failed"), 2u);  // one attempt each
}

// A zstd shard (docs/packing.md) whose first entry is its dictionary: the manifest counts the files without
// it, the shard id is the files' alone, and no file of the layer is the dictionary. Small modules compressed
// with it, and a large file in frames with its seek table, which makes the shard come in ranges.
TEST_F(materialise_node, a_zstd_shard_with_its_dictionary_is_made_of_its_files_alone) {
  test_zip::spec_entry dictionary{".ferry-zstd-dictionary", test_zip::train_dictionary(1), 0444};
  dictionary.deflate = false;
  dictionary.dictionary = true;
  std::vector<test_zip::spec_entry> entries = {dictionary};
  for (int i = 0; i < 5; ++i) {
    test_zip::spec_entry e{"pkg/m" + std::to_string(i) + ".py", test_zip::sample_module(1, i)};
    e.zstd = true;
    e.zstd_dict = true;
    entries.push_back(std::move(e));
  }
  test_zip::spec_entry large{"pkg/large.so", random_bytes(1 << 20, 41) + std::string(5 << 20, 'L')};
  large.zstd = true;
  entries.push_back(large);
  const auto zip = test_zip::make_zip(entries);
  ASSERT_GT(zip.size(), 1u << 20);
  std::uint64_t content = 0;
  for (std::size_t i = 1; i < entries.size(); ++i) content += entries[i].data.size();
  layer_source l;
  l.name = "zstd";
  l.shards.push_back(store(prefix_ + "/zstd-0.zstd.zip", zip, entries.size() - 1, content));
  l.shards.back().id = test_zip::shard_id(entries);
  l.id = net::hex_sha256(prefix_ + l.shards.back().sha256);
  diagnostics diag;
  auto r = materialise_now(plan_of({l}), diag);
  ASSERT_TRUE(r) << diag.message;
  for (std::size_t i = 1; i < entries.size(); ++i)
    EXPECT_EQ(test::read_file(layer_dir(l) / entries[i].name), entries[i].data) << entries[i].name;
  EXPECT_FALSE(fs::exists(layer_dir(l) / ".ferry-zstd-dictionary"));
  EXPECT_TRUE(fs::exists(marker(l)));
}

// A layer holding `content` as "lib/big.so" cut into pieces at `cuts` (offsets after 0), and "lib/a.py"
// in a shard of its own: the shards a workstation makes of a file over the piece size (packaging/layer.hpp).
// `zip_of_piece(k)` says which piece's bytes the object of piece k holds (storage may swap them).
layer_source pieced_layer(materialise_node& t, const std::string& name, const std::string& content,
                          const std::vector<std::uint64_t>& cuts, const std::function<std::size_t(std::size_t)>& zip_of_piece,
                          fs::perms mode = fs::perms(0755));

TEST_F(materialise_node, a_file_cut_into_pieces_is_written_piece_by_piece_at_each_offset) {
  const auto content = random_bytes(700000, 41);
  const auto l = pieced_layer(*this, "torchlike", content, {300000, 600000}, [](std::size_t k) { return k; });
  ASSERT_EQ(l.shards.size(), 4u);
  diagnostics diag;
  auto r = materialise_now(plan_of({l}), diag);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(test::read_file(layer_dir(l) / "lib" / "big.so"), content);
  EXPECT_EQ(mode_of(layer_dir(l) / "lib" / "big.so"), 0755u);
  EXPECT_EQ(test::read_file(layer_dir(l) / "lib" / "a.py"), "A = 1\n");
  EXPECT_EQ(count_status(action_types::node::shard, "succeeded"), 4u);
  EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
}

TEST_F(materialise_node, a_read_only_file_cut_into_pieces_takes_every_piece_and_ends_read_only) {
  const auto content = random_bytes(500000, 45);
  const auto l = pieced_layer(*this, "readonly", content, {200000, 400000}, [](std::size_t k) { return k; },
                              fs::perms(0444));
  diagnostics diag;
  auto r = materialise_now(plan_of({l}), diag);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(test::read_file(layer_dir(l) / "lib" / "big.so"), content);
  EXPECT_EQ(mode_of(layer_dir(l) / "lib" / "big.so"), 0444u);
}

// Storage (or a peer) hands a piece's object holding another file, of the piece's size: the piece's path is
// the workstation's, so the zip is refused before a byte is written, and no such file is ever made.
TEST_F(materialise_node, a_piece_whose_zip_names_another_file_is_refused_before_anything_is_written) {
  const auto content = random_bytes(400000, 47);
  auto l = pieced_layer(*this, "renamed", content, {200000}, [](std::size_t k) { return k; });
  auto& piece = l.shards.back();
  const auto id = piece.id;
  piece = store(prefix_ + "/renamed-forged.zip", zip_of({{"sitecustomize.py", content.substr(200000), fs::perms(0644)}}),
                1, content.size() - 200000);
  piece.id = id;
  piece.piece_path = "lib/big.so";
  piece.piece_offset = 200000;
  piece.file_size = content.size();
  diagnostics diag;
  auto r = materialise_now(plan_of({l}), diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), node::errc::over_manifest) << diag.message;
  EXPECT_NE(diag.message.find("is a piece of 200000 bytes of lib/big.so"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("named sitecustomize.py"), std::string::npos) << diag.message;
  EXPECT_FALSE(fs::exists(layer_dir(l)));
  EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
}

TEST_F(materialise_node, a_piece_stored_in_another_pieces_place_is_refused_whatever_its_digest_says) {
  const auto content = random_bytes(600000, 43);
  // The objects of pieces 1 and 2 hold each other's zips, and the plan's digests were edited to match: only
  // the offset in each piece's id tells them apart.
  const auto l = pieced_layer(*this, "swapped", content, {300000}, [](std::size_t k) { return 1 - k; });
  diagnostics diag;
  auto r = materialise_now(plan_of({l}), diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), node::errc::not_packed) << diag.message;
  EXPECT_NE(diag.message.find("does not match what this workstation packed"), std::string::npos) << diag.message;
  EXPECT_FALSE(fs::exists(layer_dir(l)));
  EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
}

layer_source pieced_layer(materialise_node& t, const std::string& name, const std::string& content,
                          const std::vector<std::uint64_t>& cuts, const std::function<std::size_t(std::size_t)>& zip_of_piece,
                          fs::perms mode) {
  std::vector<std::uint64_t> starts = {0};
  starts.insert(starts.end(), cuts.begin(), cuts.end());
  auto piece = [&](std::size_t k) {
    const auto end = k + 1 < starts.size() ? starts[k + 1] : content.size();
    return content.substr(starts[k], end - starts[k]);
  };
  layer_source l = t.layer(name, {{{"lib/a.py", "A = 1\n"}}});
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const auto bytes = piece(k);
    const auto stored = piece(zip_of_piece(k));
    auto s = t.store(fmt::format("{}/{}-piece-{}.zip", t.prefix_, name, k),
                     t.zip_of({{"lib/big.so", stored, mode}}), 1, bytes.size());
    s.piece_path = "lib/big.so";
    s.piece_offset = starts[k];
    s.file_size = content.size();
    packaging::entries_id_stream id;
    id.add_piece("lib/big.so", 0100000 | static_cast<std::uint32_t>(mode), starts[k], bytes.size(), net::sha256(bytes));
    s.id = net::to_hex(id.finish());
    l.shards.push_back(std::move(s));
  }
  return l;
}

TEST_F(materialise_node, a_missing_object_fails_the_download_naming_the_layer) {
  auto gone = layer("torch", {{{"torch/__init__.py", "T = 1\n"}}});
  gone.shards[0].url = s3_->s3->presign_get(bucket, prefix_ + "/no-such-key.zip");
  diagnostics diag;
  auto r = materialise_now(plan_of({gone}), diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), net::errc::no_such_key) << diag.message;
  EXPECT_NE(diag.message.find("downloading layer torch (" + gone.id.substr(0, 12) + ", shard 1 of 1)"),
            std::string::npos)
      << diag.message;
  EXPECT_NE(diag.message.find("404"), std::string::npos) << diag.message;
  EXPECT_FALSE(fs::exists(layer_dir(gone)));
  EXPECT_FALSE(fs::exists(marker(gone)));
  EXPECT_TRUE(leftovers().empty());
  EXPECT_EQ(count_status(action_types::node::shard, "failed"), 1u);  // a 404 is not tried again
}

// Points `shard` at `proxy` instead of moto.
void through(test::fault_proxy& proxy, shard_source& shard, std::uint16_t moto_port) {
  const auto at = fmt::format("127.0.0.1:{}", moto_port);
  shard.url.replace(shard.url.find(at), at.size(), fmt::format("127.0.0.1:{}", proxy.port()));
}

// The start and end of the Range header in a request head; none: {0, 0} and false.
std::optional<std::pair<std::uint64_t, std::uint64_t>> range_of(const std::string& head) {
  const auto at = head.find("\r\nRange: bytes=");
  if (at == std::string::npos) return std::nullopt;
  const auto text = head.substr(at + 15, head.find("\r\n", at + 2) - at - 15);
  const auto dash = text.find('-');
  return std::pair{std::stoull(text.substr(0, dash)), std::stoull(text.substr(dash + 1))};
}

// A layer whose third shard fails for good in the first attempt (every request for it cut, its resumes
// too) after some of its files were written: the second attempt fetches that shard alone, into the same
// directory, and the two shards that passed are kept, not fetched again.
TEST_F(materialise_node, a_second_attempt_at_a_layer_fetches_only_the_shard_that_failed) {
  std::vector<file_spec> big;
  for (int i = 0; i < 6; ++i) big.push_back({fmt::format("c/{}.bin", i), random_bytes(256 << 10, 50 + i)});
  auto alpha = layer("alpha", {{{"a/one.py", random_bytes(200000, 41)}}, {{"b/two.py", random_bytes(200000, 42)}}, big});
  ASSERT_GT(alpha.shards[2].bytes, 1u << 20);  // comes in ranges, and is extracted as they come
  auto o = bare_options();
  o.limits.range_size = 1 << 20;
  // Its end comes whole (under the cut), then its first range and both resumes of it are cut: four
  // connections, all in the first attempt.
  test::fault_proxy proxy("127.0.0.1", moto_->port());
  proxy.cut_download_after(150000);
  proxy.set_faulty_connections(2 + static_cast<std::uint64_t>(o.limits.attempts));
  through(proxy, alpha.shards[2], moto_->port());
  diagnostics diag;
  auto r = materialise_now(plan_of({alpha}), diag, o);
  ASSERT_TRUE(r) << diag.message;
  const auto made = layer_dir(alpha);
  EXPECT_EQ(test::read_file(made / "a" / "one.py"), random_bytes(200000, 41));
  EXPECT_EQ(test::read_file(made / "b" / "two.py"), random_bytes(200000, 42));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(test::read_file(made / "c" / fmt::format("{}.bin", i)), random_bytes(256 << 10, 50 + i)) << i;
  EXPECT_EQ(count_status(action_types::node::attempt, "failed"), 1u);
  EXPECT_EQ(count_status(action_types::node::attempt, "succeeded"), 1u);
  // The shards that passed were fetched once; the one that failed, once per attempt.
  EXPECT_EQ(gets_of("alpha-0.zip"), 1u) << moto_->log();
  EXPECT_EQ(gets_of("alpha-1.zip"), 1u) << moto_->log();
  EXPECT_EQ(count_status(action_types::node::shard, "succeeded"), 3u);
  EXPECT_EQ(count_status(action_types::node::shard, "failed"), 1u);
  EXPECT_EQ(proxy.connections_cut(), 1u + static_cast<std::uint64_t>(o.limits.attempts));
  EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
}

// A download cut short goes on with a Range request from where its bytes end, in the same attempt: a
// small shard (one GET) and a large one (in ranges) alike, and neither is fetched whole again.
TEST_F(materialise_node, a_cut_download_resumes_with_a_range_request_where_its_bytes_end) {
  auto small = layer("small", {{{"s.bin", random_bytes(900000, 61)}}});
  std::vector<file_spec> files;
  for (int i = 0; i < 6; ++i) files.push_back({fmt::format("big/{}.bin", i), random_bytes(256 << 10, 70 + i)});
  auto big = layer("big", {files});
  ASSERT_LT(small.shards[0].bytes, 1u << 20);
  ASSERT_GT(big.shards[0].bytes, 1u << 20);
  auto o = bare_options();
  o.limits.range_size = 1 << 20;
  test::fault_proxy small_proxy("127.0.0.1", moto_->port()), big_proxy("127.0.0.1", moto_->port());
  small_proxy.cut_download_after(600000);
  small_proxy.set_faulty_connections(1);
  big_proxy.cut_download_after(800000);  // its end (65,633 bytes) passes; its first range is cut
  big_proxy.set_faulty_connections(2);
  through(small_proxy, small.shards[0], moto_->port());
  through(big_proxy, big.shards[0], moto_->port());
  diagnostics diag;
  auto r = materialise_now(plan_of({small, big}), diag, o);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(test::read_file(layer_dir(small) / "s.bin"), random_bytes(900000, 61));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(test::read_file(layer_dir(big) / "big" / fmt::format("{}.bin", i)), random_bytes(256 << 10, 70 + i));
  EXPECT_EQ(count_status(action_types::node::attempt, "failed"), 0u);
  EXPECT_EQ(count_status(action_types::node::resume, "succeeded"), 2u);

  // The small one: a plain GET, then the rest from where it was cut. (Where exactly depends on how much
  // the node read before the reset, which discards what it had not.)
  const auto size = small.shards[0].bytes;
  auto heads = small_proxy.request_heads();
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_FALSE(range_of(heads[0])) << heads[0];
  const auto resumed = range_of(heads[1]);
  ASSERT_TRUE(resumed) << heads[1];
  EXPECT_GT(resumed->first, 0u);
  EXPECT_LT(resumed->first, 600000u);
  EXPECT_EQ(resumed->second, size - 1);
  // The large one: its end, its first range, then the rest of that range.
  heads = big_proxy.request_heads();
  ASSERT_GE(heads.size(), 3u);
  const auto first = range_of(heads[1]), rest = range_of(heads[2]);
  ASSERT_TRUE(first && rest) << heads[1] << heads[2];
  EXPECT_EQ(first->first, 0u);
  EXPECT_GT(rest->first, 0u);
  EXPECT_LT(rest->first, 800000u);
  EXPECT_EQ(rest->second, first->second);
}

asio::awaitable<void> materialise_into(materialise_node& t, const environment_plan& plan,
                                       const materialise_options& o, result<environment>& out, diagnostics& diag) {
  co_await net::accept_cancellation();
  out = co_await t.materialise_on(plan, o, diag);
}

TEST_F(materialise_node, two_runs_at_once_share_the_cache_and_download_each_layer_once) {
  const auto plan = plan_of({layer("workspace", workspace_files()), layer("alpha", two_shards()),
                             layer("beta", {{{"beta/big", random_bytes(2 << 20, 2)}}})},
                            0);
  result<environment> a = make_error_code(errc::materialise_failed);
  result<environment> b = make_error_code(errc::materialise_failed);
  diagnostics diag_a, diag_b;
  const auto o = bare_options();
  run([](materialise_node& t, const environment_plan& p, const materialise_options& opts, result<environment>& ra,
         result<environment>& rb, diagnostics& da, diagnostics& db) -> asio::awaitable<void> {
    std::vector<asio::awaitable<void>> both;
    both.push_back(materialise_into(t, p, opts, ra, da));
    both.push_back(materialise_into(t, p, opts, rb, db));
    co_await net::run_all(std::move(both));
  }(*this, plan, o, a, b, diag_a, diag_b));
  ASSERT_TRUE(a) << diag_a.message;
  ASSERT_TRUE(b) << diag_b.message;
  EXPECT_EQ(a->layers_fetched + b->layers_fetched, 3u);
  EXPECT_EQ(a->layers_cached + b->layers_cached, 3u);
  EXPECT_EQ(a->python_path, b->python_path);
  EXPECT_EQ(a->workdir, b->workdir);
  EXPECT_EQ(test::read_file(layer_dir(plan.layers[2]) / "beta" / "big"), random_bytes(2 << 20, 2));
  EXPECT_EQ(count_status(action_types::node::shard, "succeeded"), 4u);
  EXPECT_EQ(count_status(action_types::agent::materialise, "succeeded"), 2u);
  expect_workspace(a->workdir);
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(materialise_node, eviction_removes_the_least_recently_used_layer_outside_the_plan) {
  const auto a = layer("a", {{{"a.bin", random_bytes(64 << 10, 3)}}});
  const auto b = layer("b", {{{"b.bin", random_bytes(64 << 10, 4)}}});
  const auto c = layer("c", {{{"c.bin", random_bytes(64 << 10, 5)}}});
  diagnostics diag;
  ASSERT_TRUE(materialise_now(plan_of({a}), diag)) << diag.message;
  ASSERT_TRUE(materialise_now(plan_of({b}), diag)) << diag.message;
  // a is used again: now b is the least recently used.
  auto again = materialise_now(plan_of({a}), diag);
  ASSERT_TRUE(again) << diag.message;
  EXPECT_EQ(again->layers_cached, 1u);
  const auto size = [&](const layer_source& l) { return std::stoull(test::read_file(marker(l))); };
  // Room for two of the three.
  auto plan = plan_of({c});
  plan.cache_cap = size(a) + size(b);
  auto r = materialise_now(plan, diag);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->layers_evicted, 1u);
  EXPECT_FALSE(fs::exists(layer_dir(b)));
  EXPECT_FALSE(fs::exists(marker(b)));
  EXPECT_TRUE(fs::exists(marker(a)));
  EXPECT_TRUE(fs::exists(marker(c)));
  EXPECT_NE(all_traces().find(fmt::format("\"layer\":\"{}\"", b.id)), std::string::npos);
  EXPECT_NE(all_traces().find(std::string(action_types::node::evicted)), std::string::npos);

  // A cap smaller than the plan itself: everything else goes, the plan's layers never do.
  auto tight = plan_of({c, b});
  tight.cache_cap = 1;
  r = materialise_now(tight, diag);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->layers_evicted, 1u);
  EXPECT_EQ(r->layers_fetched, 1u);
  EXPECT_FALSE(fs::exists(marker(a)));
  EXPECT_FALSE(fs::exists(layer_dir(a)));
  EXPECT_TRUE(fs::exists(marker(b)));
  EXPECT_TRUE(fs::exists(marker(c)));
  EXPECT_TRUE(fs::exists(layer_dir(c) / "c.bin"));
}

TEST_F(materialise_node, a_layer_held_by_another_run_times_out_naming_its_lock) {
  const auto alpha = layer("alpha", two_shards());
  fs::create_directories(cache() / "layers");
  const auto lock = (cache() / "layers" / (alpha.id + ".lock")).string();
  auto holder = test::spawn({"sh", "-c", "exec 9>>\"$1\" && flock 9 && : >\"$1.held\" && exec sleep 30", "sh", lock});
  for (int i = 0; i < 1000 && !fs::exists(lock + ".held"); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(fs::exists(lock + ".held"));
  auto o = bare_options();
  o.limits.lock_timeout_ms = 500;
  diagnostics diag;
  // Another layer is not held up by it.
  const auto other = layer("other", {{{"o.py", "O = 1\n"}}});
  auto r = materialise_now(plan_of({other, alpha}), diag, o);
  holder->signal(SIGKILL);
  holder->wait();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), node::errc::lock_timeout) << diag.message;
  EXPECT_NE(diag.message.find("layer alpha stayed locked by another run for 500 ms"), std::string::npos)
      << diag.message;
  EXPECT_TRUE(fs::exists(marker(other)));
  EXPECT_EQ(count_status(action_types::node::lock, "failed"), 1u);
}

TEST_F(materialise_node, a_full_disk_names_the_directory_and_the_bytes_and_leaves_nothing_under_a_final_name) {
  // The node's sshd has a mount namespace of its own (and the mount goes with it).
  fs::create_directories(cache());
  const auto mounted = on_node(fmt::format("mount -t tmpfs -o size=20m tmpfs '{}'", cache().string()));
  ASSERT_EQ(mounted, "") << "cannot mount a tmpfs on the node";
  // A shard whose manifest says nothing of its size is written until the disk is full.
  const auto filler = layer("filler", {{{"fill.bin", random_bytes(10 << 20, 7)}}});
  auto big = layer("big", {{{"big.bin", random_bytes(8 << 20, 8)}}});
  diagnostics diag;
  auto first = materialise_now(plan_of({filler}), diag);
  ASSERT_TRUE(first) << diag.message;
  big.shards[0].content = 0;
  big.shards[0].files = 0;
  auto r = materialise_now(plan_of({big}), diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), node::errc::disk_full) << diag.message;
  EXPECT_NE(diag.message.find("no space left in " + (cache() / "layers").string()), std::string::npos) << diag.message;
  EXPECT_FALSE(fs::exists(marker(big)));
  EXPECT_FALSE(fs::exists(layer_dir(big)));
  // With the manifest's own figures, the node refuses before writing a byte.
  auto honest = layer("honest", {{{"big.bin", random_bytes(8 << 20, 8)}}});
  r = materialise_now(plan_of({honest}), diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), node::errc::disk_full) << diag.message;
  EXPECT_NE(diag.message.find("no space left in " + (cache() / "layers").string()), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("needs 8388608 bytes"), std::string::npos) << diag.message;
  EXPECT_FALSE(fs::exists(marker(honest)));
  EXPECT_FALSE(fs::exists(layer_dir(honest)));
  EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
}

// Polls the node's cache until a layer's temporary directory has content.
asio::awaitable<void> until_extracting(fs::path layers, std::string id) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  for (;;) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(layers, ec)) {
      if (e.path().filename().string().starts_with(id + ".tmp.") && !fs::is_empty(e.path(), ec)) co_return;
    }
    timer.expires_after(10ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

TEST_F(materialise_node, cancelled_mid_download_leaves_no_half_layer_and_no_process) {
  using namespace asio::experimental::awaitable_operators;
  const auto small = layer("workspace", workspace_files());
  // Many files, so that some are written long before the last byte arrives.
  std::vector<file_spec> files;
  for (int i = 0; i < 64; ++i) files.push_back({fmt::format("big/{:02}.bin", i), random_bytes(64 << 10, 100 + i)});
  auto big = layer("big", {files});
  // The big one comes through a proxy that holds back every chunk.
  test::fault_proxy proxy("127.0.0.1", moto_->port());
  proxy.set_delay(100ms);
  auto& url = big.shards[0].url;
  const auto at = fmt::format("127.0.0.1:{}", moto_->port());
  url.replace(url.find(at), at.size(), fmt::format("127.0.0.1:{}", proxy.port()));
  auto plan = plan_of({small, big}, 0);
  auto o = bare_options();
  o.limits.parallelism = 2;  // both layers at once: the small one ends while the big one crawls
  diagnostics diag;
  auto outcome = run([](materialise_node& t, const environment_plan& p, const materialise_options& opts,
                        std::string id, diagnostics& d) -> asio::awaitable<int> {
    auto work = t.materialise_on(p, opts, d);
    auto watch = until_extracting(t.cache() / "layers", std::move(id));
    auto raced = co_await (std::move(work) || std::move(watch));
    if (raced.index() == 0) co_return std::get<0>(raced) ? 0 : 1;  // ended before the download began
    co_return 2;
  }(*this, plan, o, big.id, diag));
  ASSERT_EQ(outcome, 2) << diag.message;
  EXPECT_GT(proxy.bytes_downloaded(), 0u);
  EXPECT_FALSE(fs::exists(layer_dir(big)));
  EXPECT_FALSE(fs::exists(marker(big)));
  EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
  EXPECT_TRUE(fs::exists(marker(small)));  // finished before: kept
  // No process of the node program is left on the node.
  for (const pid_t pid : server.processes()) {
    const auto cmdline = test::read_file("/proc/" + std::to_string(pid) + "/cmdline");
    EXPECT_EQ(cmdline.find("ferry-node"), std::string::npos) << cmdline;
  }
  const auto ends = actions(action_types::agent::materialise);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].at("action_status").as_string(), "failed");
  EXPECT_EQ(ends[0].at("reason").as_string(), "cancelled");
  // The next run finds the cache sound and fetches the big layer whole.
  proxy.set_delay(0ms);
  auto next = materialise_now(plan, diag, o);
  ASSERT_TRUE(next) << diag.message;
  EXPECT_EQ(next->layers_fetched, 1u);
  EXPECT_EQ(test::read_file(layer_dir(big) / "big" / "63.bin"), random_bytes(64 << 10, 163));
}

// The presigned URL is a credential: while the node program downloads, no argv on the node holds it, and
// no file of the node's cache does either.
TEST_F(materialise_node, no_url_reaches_an_argv_or_a_file_on_the_node) {
  auto big = layer("big", {{{"big.bin", random_bytes(3 << 20, 9)}}});
  test::fault_proxy proxy("127.0.0.1", moto_->port());
  proxy.set_delay(20ms);
  auto& url = big.shards[0].url;
  const auto at = fmt::format("127.0.0.1:{}", moto_->port());
  url.replace(url.find(at), at.size(), fmt::format("127.0.0.1:{}", proxy.port()));
  std::atomic<bool> done{false};
  std::vector<std::string> seen;
  std::thread watcher([&] {
    while (!done) {
      for (const pid_t pid : server.processes()) {
        std::error_code ec;
        const auto path = "/proc/" + std::to_string(pid) + "/cmdline";
        if (!fs::exists(path, ec)) continue;
        seen.push_back(test::read_file(path));
      }
      std::this_thread::sleep_for(5ms);
    }
  });
  diagnostics diag;
  auto r = materialise_now(plan_of({big}), diag);
  done = true;
  watcher.join();
  ASSERT_TRUE(r) << diag.message;
  bool saw_program = false;
  for (const auto& argv : seen) {
    EXPECT_EQ(argv.find("X-Amz"), std::string::npos) << argv;
    saw_program |= argv.find("ferry-node") != std::string::npos;
  }
  EXPECT_TRUE(saw_program) << "the watcher never saw the node program run";
  for (const auto& e : fs::recursive_directory_iterator(cache())) {
    if (!e.is_regular_file() || e.path().filename().string().starts_with("ferry-node")) continue;
    EXPECT_EQ(test::read_file(e.path()).find("X-Amz"), std::string::npos) << e.path();
  }
}

// ---------------------------------------------------------------------------------------------------------
// Staging by the node program (`ferry-node stage`), with the same bare PATH: no curl, no md5sum.

asio::awaitable<result<stage_plan>> plan_staging(materialise_node& t, std::string prefix, diagnostics& diag) {
  const stage_spec spec{materialise_node::bucket, prefix, (t.dir / "staged").string()};
  co_return co_await plan_stage(t.trace.root(), *t.s3_->s3, spec, 0, diag);
}

asio::awaitable<result<stage_result>> stage_on(materialise_node& t, const stage_plan& plan, diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  auto o = stage_options{};
  o.limits = test_options().limits;
  o.program = the_program();
  o.cache_dir = t.cache().string();
  o.node_path = t.bin_with({"mkdir", "cat", "chmod", "rm"}).string();
  net::ssh_node_link link(*session);
  auto r = co_await stage(t.trace.root(), link, plan, o, diag);
  (*session)->close();
  co_return r;
}

TEST_F(materialise_node, staging_needs_no_curl_keeps_names_and_checks_each_object_against_its_etag) {
  const auto prefix = prefix_ + "/data/";
  const std::map<std::string, std::string> objects = {
      {"big.bin", random_bytes(3 << 20, 21)}, {"data", "the plain one"}, {"data;1", "its version"},
      {"sub/dir/small.bin", "small"}};
  for (const auto& [path, bytes] : objects) store(prefix + path, bytes);
  diagnostics diag;
  auto plan = run(plan_staging(*this, prefix, diag));
  ASSERT_TRUE(plan) << diag.message;
  auto staged = run(stage_on(*this, *plan, diag));
  ASSERT_TRUE(staged) << diag.message;
  EXPECT_EQ(staged->fetched, objects.size());
  for (const auto& [path, bytes] : objects) EXPECT_EQ(test::read_file(dir / "staged" / path), bytes) << path;
  EXPECT_NE(all_traces().find(action_types::node::stage_object), std::string::npos);

  // An object whose bytes do not have the MD5 of its ETag is refused, naming it, and nothing of the
  // staging is put in place.
  auto wrong = *plan;
  wrong.node_dir = (dir / "staged-wrong").string();
  for (auto& o : wrong.objects)
    if (o.path == "big.bin") o.etag = std::string(32, '0');
  auto refused = run(stage_on(*this, wrong, diag));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), node::errc::digest_mismatch) << diag.message;
  EXPECT_NE(diag.message.find("big.bin"), std::string::npos) << diag.message;
  for (const auto& [path, bytes] : objects) EXPECT_FALSE(fs::exists(dir / "staged-wrong" / path)) << path;
}


// ---- Fan-out: one node keeps checked copies, its `ferry-node serve` hands them to another ----

struct fanout_run {
  std::optional<unsigned> port;
  bool stop = false;
  std::optional<result<environment>> child;
};

// The first node's server, over its own session, until the second node is done.
asio::awaitable<void> serve_for(materialise_node& t, serve_settings s, fanout_run& r, diagnostics& d) {
  co_await net::accept_cancellation();
  auto session = co_await t.connect(t.server, d);
  if (!session) {
    r.stop = true;
    co_return;
  }
  auto o = t.bare_options();
  o.cache_dir = t.cache().string();
  net::ssh_node_link link(*session);
  (void)co_await serve_peers(
      t.trace.root(), link, o, s, [&r](unsigned port) { r.port = port; }, [&r] { return r.stop; }, d);
  (*session)->close();
}

// The second node: `plan` (its own cache) with the first node's server as its parent.
asio::awaitable<void> child_from(materialise_node& t, environment_plan plan, std::string token, fanout_run& r,
                                 diagnostics& d) {
  co_await net::accept_cancellation();
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (int i = 0; i < 1500 && !r.port; ++i) {
    timer.expires_after(20ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
  if (r.port) {
    const auto source = fmt::format("http://127.0.0.1:{}", *r.port);
    fanout_role role{token, ""};
    auto feed = layer_feed::of(co_await asio::this_coro::executor, plan);
    feed->fan_out("node-2", source, false);  // the node's id, as its session names it
    auto o = t.bare_options();
    o.cache_dir = plan.cache_dir;
    auto session = co_await t.connect(t.server, d, "node-2");
    if (session) {
      net::ssh_node_link link(*session);
      r.child = co_await materialise(t.trace.root(), link, *feed, o, d, &role);
      (*session)->close();
    }
  }
  r.stop = true;
}

asio::awaitable<void> serve_and_fetch(materialise_node& t, serve_settings s, environment_plan plan, std::string token,
                                      fanout_run& r, diagnostics& serve_diag, diagnostics& child_diag) {
  std::vector<asio::awaitable<void>> both;
  both.push_back(serve_for(t, std::move(s), r, serve_diag));
  both.push_back(child_from(t, std::move(plan), std::move(token), r, child_diag));
  co_await net::run_all(std::move(both));
}

// The first node's materialise, keeping copies under `serve_id`.
asio::awaitable<result<environment>> keep_copies(materialise_node& t, const environment_plan& plan,
                                                 const fanout_role& role, diagnostics& d) {
  auto feed = layer_feed::of(co_await asio::this_coro::executor, plan);
  auto o = t.bare_options();
  o.cache_dir = plan.cache_dir;
  auto session = co_await t.connect(t.server, d);
  if (!session) co_return session.error();
  net::ssh_node_link link(*session);
  auto r = co_await materialise(t.trace.root(), link, *feed, o, d, &role);
  (*session)->close();
  co_return r;
}

class fanout_node : public materialise_node {
 public:
  const std::string token = std::string(64, 'c');
  const std::string serve_id = "0123456789abcdef";
  std::vector<layer_source> layers;
  environment_plan plan;
  std::size_t storage_gets = 0;

  // Node 1 fetches from storage, keeping a copy of every shard.
  void first_node() {
    layers = {layer("workspace", workspace_files()), layer("alpha", two_shards())};
    plan = plan_of(layers, 0);
    const fanout_role keeper{token, serve_id};
    diagnostics diag;
    auto first = run(keep_copies(*this, plan, keeper, diag));
    ASSERT_TRUE(first) << diag.message;
    for (const auto& l : layers)
      for (const auto& s : l.shards) EXPECT_TRUE(fs::exists(copies() / s.sha256)) << l.name;
    storage_gets = gets_of(".zip");
    EXPECT_EQ(storage_gets, 3u);
  }
  fs::path copies() const { return cache() / "serve" / serve_id; }
  fs::path second_cache() const { return dir / "node-cache-2"; }
  // Node 2, from node 1's server, presenting `as_token`.
  result<environment> second_node(const std::string& as_token, diagnostics& child_diag) {
    auto child_plan = plan;
    child_plan.cache_dir = second_cache().string();
    fanout_run r;
    diagnostics serve_diag;
    run(serve_and_fetch(*this, serve_settings{serve_id, token, "127.0.0.1", 5000}, child_plan, as_token, r, serve_diag,
                        child_diag));
    EXPECT_TRUE(r.port) << serve_diag.message;
    if (!r.child) return error_code(asio::error::operation_aborted);
    return *r.child;
  }
  // The second node's shard fetches: how many named the peer as their source, and how many failed.
  std::size_t from_peer() { return count_in(all_traces(), "\"source\":\"http://127.0.0.1:"); }
  static std::size_t count_in(const std::string& text, std::string_view what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
  json::object serve_end() {
    for (const auto& a : actions(action_types::node::serve)) return a;
    return {};
  }
};

TEST_F(fanout_node, a_peer_hands_on_its_checked_copies_and_storage_serves_each_shard_once) {
  first_node();
  diagnostics diag;
  auto second = second_node(token, diag);
  ASSERT_TRUE(second) << diag.message;
  EXPECT_EQ(second->layers_fetched, 2u);
  EXPECT_EQ(gets_of(".zip"), storage_gets) << "storage served a shard twice";
  EXPECT_EQ(from_peer(), 3u);
  const auto alpha = second_cache() / "layers" / layers[1].id;
  EXPECT_EQ(test::read_file(alpha / "alpha" / "data.bin"), random_bytes(100000, 1));
  expect_workspace(second_cache() / "layers" / layers[0].id);
  const auto end = serve_end();
  EXPECT_EQ(end.at("action_status").as_string(), "succeeded");
  EXPECT_EQ(end.at("served").as_int64(), 3);
  EXPECT_EQ(end.at("refused").as_int64(), 0);
  EXPECT_FALSE(fs::exists(copies()));  // the server removed them as it ended
  EXPECT_EQ(all_traces().find(token), std::string::npos) << "the token reached a trace";
}

TEST_F(fanout_node, a_forged_copy_fails_its_digest_and_the_layer_comes_from_storage) {
  first_node();
  // The peer hands on other bytes of the same size for alpha's first shard.
  const auto& forged = layers[1].shards[0];
  std::string bytes = test::read_file(copies() / forged.sha256);
  bytes[bytes.size() / 2] ^= 0x55;
  std::ofstream(copies() / forged.sha256, std::ios::binary | std::ios::trunc) << bytes;
  diagnostics diag;
  auto second = second_node(token, diag);
  ASSERT_TRUE(second) << diag.message;
  EXPECT_EQ(test::read_file(second_cache() / "layers" / layers[1].id / "alpha" / "data.bin"),
            random_bytes(100000, 1));
  // alpha's second attempt came from storage, the forged shard alone: its other shard passed its checks
  // from the peer, and was kept. The workspace came from the peer.
  EXPECT_EQ(gets_of(".zip"), storage_gets + 1);
  const auto text = all_traces();
  EXPECT_NE(text.find("not the " + forged.sha256 + " its manifest names"), std::string::npos);
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(fanout_node, a_wrong_token_is_refused_and_the_layers_come_from_storage) {
  first_node();
  diagnostics diag;
  auto second = second_node(std::string(64, 'd'), diag);
  ASSERT_TRUE(second) << diag.message;
  EXPECT_EQ(gets_of(".zip"), storage_gets + 3);
  const auto end = serve_end();
  EXPECT_EQ(end.at("served").as_int64(), 0);
  EXPECT_GE(end.at("refused").as_int64(), 2);  // the first shard of each layer asked, then storage
  // The refusal names the peer that answered, never storage, which served every shard.
  const auto text = all_traces();
  EXPECT_NE(text.find("the peer answered HTTP 403 (it refused this job's token)"), std::string::npos) << text;
  EXPECT_EQ(text.find("storage answered HTTP 403"), std::string::npos) << text;
}
}  // namespace
}  // namespace ferry::agent
