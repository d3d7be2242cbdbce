// Lazy start end to end through the ferry binary: `ferry run -- python3 ...` on a local node (sshd in a
// network namespace) with moto_server as storage, the command started once the workspace is on the node
// and each import held by the hook (agent/node/import_hook/sitecustomize.py) until its layer lands. The
// fault proxy, on the bridge address where the node reaches it too, slows storage down so that a layer is
// still on its way when the program asks for it.
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
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <thread>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

struct layer_span {
  double queued = -1, started = -1, ended = -1;  // queued: when its plan line came (a message)
  std::string status;
};

// Each layer's ferry:materialise:layer action by layer name: when its line came, when it started and
// ended, and how.
std::map<std::string, layer_span> layer_spans(const std::vector<json::object>& lines) {
  std::map<std::string, std::string> name_of_task_level;  // the started line's level prefix -> name
  std::map<std::string, layer_span> out;
  for (const auto& o : lines) {
    if (trace_type(o) == action_types::node::queued) out[trace_text(o, "name")].queued = o.at("timestamp").as_double();
    if (trace_type(o) != action_types::node::layer) continue;
    const auto& level = o.at("task_level").as_array();
    std::string prefix;
    for (std::size_t i = 0; i + 1 < level.size(); ++i) prefix += std::to_string(level[i].as_int64()) + "/";
    const auto status = trace_text(o, "action_status");
    const auto at = o.at("timestamp").as_double();
    if (status == "started") {
      name_of_task_level[prefix] = trace_text(o, "name");
      out[trace_text(o, "name")].started = at;
    } else if (auto it = name_of_task_level.find(prefix); it != name_of_task_level.end()) {
      out[it->second].ended = at;
      out[it->second].status = status;
    }
  }
  return out;
}

class lazy_start : public local_nodes {
 protected:
  lazy_start() : local_nodes("ferry-lazy") {}

  void SetUp() override {
    local_nodes::SetUp();
    if (!moto_) return;
    std::string why;
    site_ = make_venv(project() / ".venv", why);
    ASSERT_FALSE(site_.empty()) << why;
    write_file(project() / ".gitignore", ".venv/\n");
    write_file(project() / "ferry.toml", "[packaging]\npython = \".venv/bin/python\"\n");
  }

  fs::path site() const { return site_; }

  // A package in the venv's site-packages (its own layer) holding `blob` random bytes, which no
  // compression shrinks: behind the proxy's rate, its layer takes its time.
  void site_package(const std::string& name, std::size_t blob) {
    write_file(site() / name / "__init__.py", fmt::format("VALUE = 'from-{}'\n", name));
    if (blob > 0) write_file(site() / name / "blob.bin", random_bytes(blob, static_cast<unsigned>(blob + name.size())));
  }

  // Storage through a proxy on the bridge: ferry's uploads and the node's downloads both pass it.
  fault_proxy& slow_storage(std::uint64_t bytes_per_second) {
    proxy_ = std::make_unique<fault_proxy>("10.200.0.1", moto_->port(), "10.200.0.1");
    proxy_->set_rate(bytes_per_second);
    return *proxy_;
  }

  // Everything in storage (`ferry pack`); then the layer's zip is replaced by the same bytes with one
  // changed in the middle: only the node's checks can tell.
  void corrupt_layer(const std::string& name) {
    const auto packed = run_ferry({"pack"}, env());
    ASSERT_EQ(packed.exit_code, 0) << packed.err;
    const auto listing = run({"aws", "s3api", "list-objects-v2", "--bucket", "ferry-lazy", "--prefix",
                              "p/manifests/", "--query", "Contents[].Key", "--output", "text"},
                             moto_->process_env());
    ASSERT_EQ(listing.exit_code, 0) << listing.err;
    const auto manifest_key = listing.out.substr(0, listing.out.find_first_of("\t\n"));
    const auto manifest = run({"aws", "s3", "cp", "s3://ferry-lazy/" + manifest_key, "-"}, moto_->process_env());
    ASSERT_EQ(manifest.exit_code, 0) << manifest.err;
    std::string shard_key;
    const auto doc = json::parse(manifest.out);
    for (const auto& l : doc.at("layers").as_array()) {
      if (l.at("name").as_string() != name) continue;
      shard_key = std::string(l.at("shards").as_array().at(0).at("key").as_string());  // the codec's suffix and all
    }
    ASSERT_FALSE(shard_key.empty()) << manifest.out;
    const auto copy = home_ / "shard.zip";
    ASSERT_EQ(run({"aws", "s3", "cp", "s3://ferry-lazy/" + shard_key, copy.string()}, moto_->process_env()).exit_code,
              0);
    {
      std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
      const auto middle = static_cast<std::streamoff>(fs::file_size(copy) / 2);
      f.seekg(middle);
      const char c = static_cast<char>(f.get() ^ 0x55);
      f.seekp(middle);
      f.put(c);
    }
    ASSERT_EQ(run({"aws", "s3", "cp", copy.string(), "s3://ferry-lazy/" + shard_key}, moto_->process_env()).exit_code,
              0);
  }

  std::unique_ptr<fault_proxy> proxy_;
  std::string site_;
};

// An egg with a -nspkg.pth file, as Debian and setuptools' namespace_packages install one: the file's line
// looks for its namespace package in its own site directory (sitedir) at start-up, before the layer that
// holds both, slowed by a blob, has landed. The line must wait for that layer.
TEST_F(lazy_start, a_nspkg_pth_line_waits_for_the_layer_it_looks_in) {
  write_file(site() / "nsp" / "__init__.py", "__import__('pkg_resources').declare_namespace(__name__)\n");
  write_file(site() / "nsp" / "sub" / "__init__.py", "S = 'from-nsp'\n");
  write_file(site() / "nsp" / "sub" / "blob.bin", random_bytes(3 << 20, 11));
  write_file(site() / "nspdist-1.2.egg-info" / "top_level.txt", "nsp\n");
  write_file(site() / "nspdist-1.2.egg-info" / "PKG-INFO", "Metadata-Version: 2.1\nName: nspdist\nVersion: 1.2\n");
  write_file(site() / "nspdist-1.2-nspkg.pth", "import sys, types, os;has_mfs = sys.version_info > (3, 5);p = os.path.join(sys._getframe(1).f_locals['sitedir'], *('nsp',));importlib = has_mfs and __import__('importlib.util');has_mfs and __import__('importlib.machinery');m = has_mfs and sys.modules.setdefault('nsp', importlib.util.module_from_spec(importlib.machinery.PathFinder.find_spec('nsp', [os.path.dirname(p)])));m = m or sys.modules.setdefault('nsp', types.ModuleType('nsp'));mp = (m or []) and m.__dict__.setdefault('__path__',[]);(p not in mp) and mp.append(p)\n");
  write_file(project() / "main.py", "print('started', flush=True)\nimport nsp.sub\nprint(nsp.sub.S)\n");
  const auto local = run({(project() / ".venv" / "bin" / "python").string(), "main.py"}, process_options{.cwd = project()});
  ASSERT_EQ(local.out, "started\nfrom-nsp\n") << local.err;
  auto& proxy = slow_storage(2 << 20);
  const auto r = run_ferry({"run", "--", "python3", "main.py"}, env_through(proxy.endpoint()));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, local.out);
  EXPECT_TRUE(contains(r.err, "(lazy start)")) << r.err;
  EXPECT_FALSE(contains(r.err, "Error processing line")) << r.err;
}

TEST_F(lazy_start, an_import_waits_for_its_layer_and_proceeds_when_it_lands) {
  site_package("slowpkg", 3 << 20);
  write_file(project() / "main.py",
             "print('started', flush=True)\n"
             "import slowpkg\n"
             "print('imported', slowpkg.VALUE)\n");
  auto& proxy = slow_storage(2 << 20);
  const auto trace = home_ / "run.jsonl";
  const auto r = run_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py"}, env_through(proxy.endpoint()));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "started\nimported from-slowpkg\n");
  EXPECT_TRUE(contains(r.err, "(lazy start)")) << r.err;
  EXPECT_TRUE(contains(r.err, "first line at ")) << r.err;

  // The command started before slowpkg's layer landed, its import waited for that layer, and went on
  // once it was in place.
  const auto lines = node_lines(trace);
  const auto spans = layer_spans(lines);
  ASSERT_TRUE(spans.contains("slowpkg")) << "no layer action for slowpkg";
  const auto& slow = spans.at("slowpkg");
  EXPECT_EQ(slow.status, "succeeded");
  double may_start = -1, wait_started = -1, wait_ended = -1;
  std::string wait_status;
  for (const auto& o : lines) {
    const auto t = trace_type(o);
    if (t == action_types::node::may_start) may_start = o.at("timestamp").as_double();
    if (t == action_types::node::import_wait && trace_text(o, "action_status") == "started") {
      EXPECT_EQ(trace_text(o, "name"), "slowpkg");
      EXPECT_EQ(trace_text(o, "layers"), "slowpkg");
      wait_started = o.at("timestamp").as_double();
    }
    if (t == action_types::node::import_wait && trace_text(o, "action_status") != "started") {
      wait_status = trace_text(o, "action_status");
      wait_ended = o.at("timestamp").as_double();
      EXPECT_TRUE(o.contains("waited_ms"));
    }
  }
  ASSERT_GE(may_start, 0) << "the node program never said the command may start";
  ASSERT_GE(wait_started, 0) << "the import of slowpkg did not wait";
  EXPECT_EQ(wait_status, "succeeded");
  EXPECT_LT(may_start, slow.ended);
  EXPECT_LT(wait_started, slow.ended);
  EXPECT_GE(wait_ended, slow.ended);
}

TEST_F(lazy_start, a_layer_that_fails_raises_an_import_error_naming_it) {
  site_package("brokenpkg", 64 << 10);
  write_file(project() / "main.py",
             "import sys\n"
             "print('started', flush=True)\n"
             "try:\n"
             "    import brokenpkg\n"
             "except ImportError as e:\n"
             "    print('ImportError:', e)\n"
             "    sys.exit(3)\n");
  // A workspace that takes a while behind the proxy: the broken layer fails before it lands, and the
  // command starts all the same, once it has.
  write_file(project() / "data.bin", random_bytes(2 << 20, 7));
  corrupt_layer("brokenpkg");
  auto o = env_through(slow_storage(2 << 20).endpoint());
  o.env["FERRY_NET_RETRY_MAX_ATTEMPTS"] = "1";
  const auto trace = home_ / "run.jsonl";
  const auto r = run_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py"}, o);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "started\nImportError: ferry: layer brokenpkg (")) << r.out;
  EXPECT_TRUE(contains(r.out, "did not arrive")) << r.out;
  // The node program's own reason (a digest or zip check), not the hook's fallback.
  EXPECT_FALSE(contains(r.out, "the node program stopped")) << r.out;
  EXPECT_TRUE(contains(r.err, "the node program failed while the command ran")) << r.err;
  const auto spans = layer_spans(node_lines(trace));
  ASSERT_TRUE(spans.contains("brokenpkg") && spans.contains("workspace"));
  EXPECT_EQ(spans.at("brokenpkg").status, "failed");
  EXPECT_EQ(spans.at("workspace").status, "succeeded");
  EXPECT_LT(spans.at("brokenpkg").ended, spans.at("workspace").ended) << "the workspace landed first";
}

TEST_F(lazy_start, a_workspace_that_cannot_land_fails_the_node_and_nothing_waits_for_it) {
  write_file(project() / "main.py", "print('never runs')\n" + std::string(64 << 10, '#') + "\n");
  corrupt_layer("workspace");
  auto o = env();
  o.env["FERRY_NET_RETRY_MAX_ATTEMPTS"] = "1";
  const auto r = run_ferry({"--trace", (home_ / "run.jsonl").string(), "run", "--", "python3", "main.py"}, o);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(contains(r.err, "no node could run the work")) << r.err;
  EXPECT_TRUE(contains(r.err, "workspace")) << r.err;
}

TEST_F(lazy_start, imports_in_threads_and_a_namespace_package_split_over_layers) {
  site_package("thread_a", 2 << 20);
  site_package("thread_b", 2 << 20);
  // nspkg: part in the workspace, part in site-packages; neither has an __init__.py.
  write_file(project() / "nspkg" / "ws_part.py", "V = 'ws'\n");
  write_file(site() / "nspkg" / "site_part.py", "V = 'site'\n");
  write_file(project() / "main.py",
             "import importlib, threading\n"
             "got = {}\n"
             "def load(name):\n"
             "    got[name] = importlib.import_module(name).VALUE\n"
             "threads = [threading.Thread(target=load, args=(n,)) for n in ('thread_a', 'thread_b')]\n"
             "for t in threads: t.start()\n"
             // While both wait for their layers (seconds behind the proxy), another import goes on: the
             // wait does not hold the global import lock.
             "import time; time.sleep(0.5)\n"
             "import colorsys\n"
             "print('stdlib import while they wait:', all(t.is_alive() for t in threads))\n"
             "for t in threads: t.join()\n"
             "import nspkg.ws_part, nspkg.site_part\n"
             "print(sorted(got.items()), nspkg.ws_part.V, nspkg.site_part.V)\n");
  auto& proxy = slow_storage(2 << 20);
  const auto trace = home_ / "run.jsonl";
  const auto r = run_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py"}, env_through(proxy.endpoint()));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out,
            "stdlib import while they wait: True\n"
            "[('thread_a', 'from-thread_a'), ('thread_b', 'from-thread_b')] ws site\n");
  std::size_t waits = 0;
  for (const auto& o : node_lines(trace))
    if (trace_type(o) == action_types::node::import_wait && trace_text(o, "action_status") == "started") ++waits;
  EXPECT_GE(waits, 1u) << "no import waited: the test did not test the hook";
}

TEST_F(lazy_start, the_order_one_run_records_orders_the_next) {
  // By size alone, big_first would come first; the program imports small_second first.
  site_package("big_first", 2 << 20);
  site_package("small_second", 64 << 10);
  write_file(project() / "main.py", "import small_second, big_first\nprint('ok')\n");
  auto o = env();
  o.env["FERRY_AGENT_DOWNLOAD_PARALLELISM"] = "1";
  const auto r1 = run_ferry({"--trace", (home_ / "run1.jsonl").string(), "run", "--", "python3", "main.py"}, o);
  ASSERT_EQ(r1.exit_code, 0) << r1.out << r1.err;
  const auto listing = run({"aws", "s3", "ls", "--recursive", "s3://ferry-lazy/p/import-orders/"}, moto_->process_env());
  ASSERT_EQ(listing.exit_code, 0) << listing.err;
  const auto key = listing.out.substr(listing.out.rfind(' ') + 1, listing.out.find('\n') - listing.out.rfind(' ') - 1);
  const auto order = run({"aws", "s3", "cp", "s3://ferry-lazy/" + key, "-"}, moto_->process_env());
  ASSERT_EQ(order.exit_code, 0) << order.err;
  const auto small_at = order.out.find("\"small_second\""), big_at = order.out.find("\"big_first\"");
  ASSERT_NE(small_at, std::string::npos) << order.out;
  ASSERT_NE(big_at, std::string::npos) << order.out;
  EXPECT_LT(small_at, big_at) << order.out;

  // A fresh node, a program that imports nothing: one download at a time, in the stored order. The worker
  // takes the best-ranked layer among those whose lines have come, and lines stream as the pack finds each
  // layer in storage: on a loaded machine one may come after the other layer started. Such a run says
  // nothing about order, so it is run again, up to three times, until both lines came before either start.
  write_file(project() / "main.py", "print('nothing imported')\n");
  auto started_first = [&](const std::string& tag) -> std::string {
    for (int attempt = 1; attempt <= 3; ++attempt) {
      EXPECT_EQ(run_ferry({"nodes", "down", "--all"}, o).exit_code, 0);
      const auto trace = home_ / (tag + "-" + std::to_string(attempt) + ".jsonl");
      const auto r = run_ferry({"--trace", trace.string(), "run", "--", "python3", "main.py"}, o);
      EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
      const auto spans = layer_spans(node_lines(trace));
      if (!spans.contains("small_second") || !spans.contains("big_first")) return "no layer action: " + r.err;
      const auto &small = spans.at("small_second"), &big = spans.at("big_first");
      if (small.queued < 0 || big.queued < 0) return "no ferry:materialise:queued message";
      if (std::max(small.queued, big.queued) <= std::min(small.started, big.started))
        return small.started < big.started ? "small_second" : "big_first";
    }
    return "in three runs, one layer's line came only after the other layer started";
  };
  EXPECT_EQ(started_first("stored-order"), "small_second");

  // Without the stored order, size decides: the control for the line above.
  ASSERT_EQ(run({"aws", "s3", "rm", "s3://ferry-lazy/" + key}, moto_->process_env()).exit_code, 0);
  EXPECT_EQ(started_first("by-size"), "big_first");
}

TEST_F(lazy_start, the_hook_runs_the_sitecustomize_it_hides_and_leaves_once_every_layer_landed) {
  // The project's own sitecustomize, first on the workstation's sys.path (PYTHONPATH, before the stdlib's
  // own), in a directory of its own: its layer may still be on its way at start-up. (One in site-packages
  // would not run: the stdlib directory, and Debian's sitecustomize there, come first.)
  write_file(home_ / "boot" / "sitecustomize.py", "import builtins\nbuiltins.ferry_test_chained = True\n");
  write_file(home_ / "boot" / "blob.bin", random_bytes(1 << 20, 7));
  site_package("late", 1 << 20);
  write_file(project() / "main.py",
             "import builtins, sys, importlib.metadata as md\n"
             "import late\n"
             "print(getattr(builtins, 'ferry_test_chained', False))\n"
             "print([type(f).__name__ for f in sys.meta_path if type(f).__module__ == 'sitecustomize'\n"
             "       and type(f).__name__ != 'TracebackWatch'])\n");  // that one waits for `import traceback`
  auto& proxy = slow_storage(2 << 20);
  auto o = env_through(proxy.endpoint());
  o.env["PYTHONPATH"] = (home_ / "boot").string();
  const auto r = run_ferry({"--trace", (home_ / "run.jsonl").string(), "run", "--", "python3", "main.py"}, o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Every layer (workspace, late, sitecustomize) was in place after `import late`: the finder had left.
  EXPECT_EQ(r.out, "True\n[]\n");
}

TEST_F(lazy_start, off_or_without_python_the_command_waits_for_every_layer) {
  site_package("somepkg", 0);
  write_file(project() / "main.py", "import somepkg\nprint(somepkg.VALUE)\n");
  auto o = env();
  o.env["FERRY_AGENT_LAZY_START"] = "false";
  const auto off = run_ferry({"--trace", (home_ / "off.jsonl").string(), "run", "--", "python3", "main.py"}, o);
  ASSERT_EQ(off.exit_code, 0) << off.out << off.err;
  EXPECT_EQ(off.out, "from-somepkg\n");
  EXPECT_FALSE(contains(off.err, "(lazy start)")) << off.err;
  const auto shell = run_ferry({"--trace", (home_ / "sh.jsonl").string(), "run", "--", "sh", "-c",
                                "python3 main.py; echo \"$FERRY_IMPORT_SOCKET\""},
                               env());
  ASSERT_EQ(shell.exit_code, 0) << shell.out << shell.err;
  EXPECT_EQ(shell.out, "from-somepkg\n\n");
  EXPECT_FALSE(contains(shell.err, "(lazy start)")) << shell.err;
  for (const auto* trace : {"off.jsonl", "sh.jsonl"})
    for (const auto& line : node_lines(home_ / trace))
      EXPECT_NE(trace_type(line), action_types::node::may_start) << trace;
}

}  // namespace
}  // namespace ferry::test

namespace ferry::test {
namespace {

// ---- a layer of many shards streams to the nodes (agent/node/plan.hpp's shard lines) ----

// What ferry's trace says of the uploads of one layer's shards (ferry:packaging:upload): the layer's id and
// when each upload ended.
struct layer_uploads {
  std::string id;
  std::vector<double> ends;
};

layer_uploads uploads_of(const fs::path& trace, const std::string& name) {
  layer_uploads out;
  std::set<std::string> ours;  // the upload actions of this layer, by trace_action_key
  for (const auto& o : trace_file_lines(trace)) {
    if (trace_type(o) != action_types::packaging::upload) continue;
    const auto key = trace_action_key(o);
    if (trace_text(o, "action_status") == "started") {
      if (trace_text(o, "layer") != name) continue;
      out.id = trace_text(o, "layer_id");
      ours.insert(key);
    } else if (ours.contains(key) && trace_text(o, "action_status") == "succeeded") {
      out.ends.push_back(o.at("timestamp").as_double());
    }
  }
  return out;
}

// When the nodes' first fetch of a shard of layer `id` started (ferry:materialise:shard); -1: none did.
double first_fetch(const std::vector<json::object>& node, const std::string& id) {
  double first = -1;
  for (const auto& o : node) {
    if (trace_type(o) != action_types::node::shard || trace_text(o, "action_status") != "started") continue;
    if (trace_text(o, "layer") != id) continue;
    const auto at = o.at("timestamp").as_double();
    if (first < 0 || at < first) first = at;
  }
  return first;
}

class streaming : public lazy_start {
 protected:
  // A package of `parts` files of 128 KiB of random bytes, each a shard of its own with a shard size of
  // 64 KiB: one layer of many shards.
  void big_package(const std::string& name, int parts) {
    site_package(name, 0);
    for (int i = 0; i < parts; ++i)
      write_file(site() / name / fmt::format("part{:02}.bin", i), random_bytes(128 << 10, static_cast<unsigned>(200 + i)));
  }

  // Uploads through the slow proxy; the nodes reach moto_server directly, at their own pace.
  process_options slow_pack_env(const fault_proxy& proxy) const {
    auto o = env_through(proxy.endpoint());
    o.env["FERRY_PACKAGING_SHARD_SIZE"] = "64KiB";
    o.env["FERRY_STORAGE_NODE_ENDPOINT"] = fmt::format("http://10.200.0.1:{}", moto_->port());
    return o;
  }
};

// Behind a slow uplink a layer of 32 shards takes seconds to store: the node starts fetching its first
// shards before the pack has stored the last one, and puts the layer in place whole all the same.
// `ferry trace stats` shows that overlap.
TEST_F(streaming, a_layer_of_many_shards_reaches_the_node_shard_by_shard_while_the_pack_stores_it) {
  big_package("bigpkg", 32);
  write_file(project() / "main.py",
             "import bigpkg, hashlib, os\n"
             "d = os.path.dirname(bigpkg.__file__)\n"
             "h = hashlib.sha256()\n"
             "for n in sorted(os.listdir(d)):\n"
             "    if n.endswith('.bin'): h.update(open(os.path.join(d, n), 'rb').read())\n"
             "print(bigpkg.VALUE, h.hexdigest())\n");
  const auto local = run({(project() / ".venv" / "bin" / "python").string(), "main.py"}, process_options{.cwd = project()});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  auto& proxy = slow_storage(1 << 20);
  const auto trace = home_ / "stream.jsonl";
  // Through sh: the eager path, every layer in place before the command.
  const auto r = run_ferry({"--trace", trace.string(), "run", "--", "sh", "-c", "python3 main.py"}, slow_pack_env(proxy));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, local.out);

  const auto uploads = uploads_of(trace, "bigpkg");
  ASSERT_FALSE(uploads.id.empty()) << "no upload of bigpkg's shards";
  ASSERT_GE(uploads.ends.size(), 32u);
  const auto last_stored = *std::max_element(uploads.ends.begin(), uploads.ends.end());
  const auto node = node_lines(trace);
  const auto first = first_fetch(node, uploads.id);
  ASSERT_GE(first, 0) << "the node fetched no shard of bigpkg";
  EXPECT_LT(first, last_stored) << "the node's first fetch of the layer waited for its last shard";
  std::size_t shard_lines = 0;
  for (const auto& o : node) shard_lines += trace_type(o) == action_types::node::shard_line ? 1 : 0;
  EXPECT_GE(shard_lines, 1u) << "no shard line reached the node";

  const auto stats = run_ferry({"trace", "stats", "--json", trace.string()}, env());
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const auto doc = json::parse(stats.out);
  const auto& job = doc.at("jobs").as_array().at(0).as_object();
  const auto& overlap = job.at("fetch_overlap").as_object();
  EXPECT_TRUE(overlap.at("measured").as_bool()) << stats.out;
  EXPECT_GE(overlap.at("fetches_before_pack_end").to_number<std::int64_t>(), 1) << stats.out;
  EXPECT_GT(overlap.at("fetching_before_pack_end_seconds").to_number<double>(), 0.0) << stats.out;
  EXPECT_GE(overlap.at("upload_to_fetch").at("count").to_number<std::int64_t>(), 32) << stats.out;
  const auto text = run_ferry({"trace", "stats", trace.string()}, env());
  EXPECT_TRUE(contains(text.out, "node fetch started before the pack ended: ")) << text.out;
}

}  // namespace
}  // namespace ferry::test
