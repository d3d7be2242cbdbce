// Materialising a run's layers on a node: the progress parser on scripted input, the script itself (sh -n,
// shellcheck, quoting), and materialise() end to end against a real sshd (its commands run here, so the
// node's cache is a temporary directory) and a real moto_server holding the zips behind presigned URLs.
#include "agent/error.hpp"
#include "agent/materialise.hpp"
#include "agent/materialise_progress.hpp"
#include "net/aws_profile.hpp"
#include "net/digest.hpp"
#include "net/run_all.hpp"
#include "net/s3_session.hpp"
#include "support/eliot.hpp"
#include "support/fault_proxy.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"

#include "../net/ssh_harness.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <csignal>
#include <random>
#include <sstream>
#include <sys/stat.h>
#include <thread>

namespace ferry::agent {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using kind = progress_event::kind;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------------------
// The progress parser.

std::vector<progress_event> parse_all(std::string_view text) {
  progress_parser p;
  auto events = p.feed(text);
  for (auto& e : p.finish()) events.push_back(std::move(e));
  return events;
}

TEST(materialise_progress, reads_every_kind_of_line) {
  const auto events = parse_all(
      "@ferry cache /root/.cache/ferry dir with spaces\n"
      "@ferry begin - lock 0\n"
      "@ferry end - lock 0 0\n"
      "@ferry begin ab12 download 3\n"
      "@ferry end ab12 download 3 123456789012\n"
      "@ferry fail ab12 verify 1 SHA-256 x (3 bytes), expected y (4 bytes)\n"
      "@ferry fail - cache 0 \n"
      "@ferry cached cd34\n"
      "@ferry fetched ab12 309 12288\n"
      "@ferry evicted ef56 4096\n"
      "@ferry missing curl unzip\n"
      "@ferry ready /work dir\n");
  ASSERT_EQ(events.size(), 12u);
  EXPECT_EQ(events[0].what, kind::cache);
  EXPECT_EQ(events[0].text, "/root/.cache/ferry dir with spaces");
  EXPECT_EQ(events[1].what, kind::begin);
  EXPECT_EQ(events[1].layer, "-");
  EXPECT_EQ(events[1].step, "lock");
  EXPECT_EQ(events[3].shard, 3u);
  EXPECT_EQ(events[4].what, kind::end);
  EXPECT_EQ(events[4].bytes, 123456789012u);
  EXPECT_EQ(events[5].what, kind::fail);
  EXPECT_EQ(events[5].step, "verify");
  EXPECT_EQ(events[5].shard, 1u);
  EXPECT_EQ(events[5].text, "SHA-256 x (3 bytes), expected y (4 bytes)");
  EXPECT_EQ(events[6].what, kind::fail);
  EXPECT_EQ(events[6].text, "");
  EXPECT_EQ(events[7].what, kind::cached);
  EXPECT_EQ(events[7].layer, "cd34");
  EXPECT_EQ(events[8].what, kind::fetched);
  EXPECT_EQ(events[8].bytes, 309u);
  EXPECT_EQ(events[8].disk_bytes, 12288u);
  EXPECT_EQ(events[9].what, kind::evicted);
  EXPECT_EQ(events[9].disk_bytes, 4096u);
  EXPECT_EQ(events[10].what, kind::missing);
  EXPECT_EQ(events[10].text, "curl unzip");
  EXPECT_EQ(events[11].what, kind::ready);
  EXPECT_EQ(events[11].text, "/work dir");
}

TEST(materialise_progress, chunks_cut_anywhere_give_the_same_events) {
  const std::string text =
      "@ferry begin ab download 0\nplain output\n@ferry end ab download 0 42\n@ferry fetched ab 42 4096\n"
      "@ferry ready /x\n";
  const auto whole = parse_all(text);
  ASSERT_EQ(whole.size(), 5u);
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    for (std::size_t second = cut; second <= text.size(); second += 7) {
      progress_parser p;
      auto events = p.feed(std::string_view(text).substr(0, cut));
      for (auto& e : p.feed(std::string_view(text).substr(cut, second - cut))) events.push_back(e);
      for (auto& e : p.feed(std::string_view(text).substr(second))) events.push_back(e);
      EXPECT_TRUE(p.finish().empty());
      ASSERT_EQ(events.size(), whole.size()) << cut << " " << second;
      for (std::size_t i = 0; i < events.size(); ++i) {
        EXPECT_EQ(events[i].what, whole[i].what);
        EXPECT_EQ(events[i].layer, whole[i].layer);
        EXPECT_EQ(events[i].bytes, whole[i].bytes);
        EXPECT_EQ(events[i].text, whole[i].text);
      }
    }
  }
}

TEST(materialise_progress, malformed_lines_are_reported_never_guessed) {
  const std::vector<std::string> bad = {
      "@ferry",
      "@ferry ",
      "@ferry frobnicate ab",
      "@ferry begin ab download",            // no shard
      "@ferry begin ab download x",          // shard not a number
      "@ferry begin ab download 0 extra",    // a field too many
      "@ferry begin ab Download 0",          // steps are lowercase words
      "@ferry end ab download 0",            // no bytes
      "@ferry end ab download 0 -5",         // negative
      "@ferry end ab download 0 12x",        // trailing garbage
      "@ferry end ab download 0 99999999999999999999999",  // overflows
      "@ferry fail ab download",             // no shard
      "@ferry cached",                       // no layer
      "@ferry cached ab cd",
      "@ferry fetched ab 1",
      "@ferry evicted ab",
      "@ferry missing",
      "@ferry ready",
      "@ferry begin  download 0",            // empty layer
  };
  for (const auto& line : bad) {
    const auto events = parse_all(line + "\n");
    ASSERT_EQ(events.size(), 1u) << line;
    EXPECT_EQ(events[0].what, kind::malformed) << line;
    EXPECT_EQ(events[0].text, line);
  }
  // Lines that are not the protocol's pass as other output.
  for (const std::string line : {"hello", "@ferryX begin", " @ferry begin ab download 0", ""}) {
    const auto events = parse_all(line + "\n");
    ASSERT_EQ(events.size(), 1u) << line;
    EXPECT_EQ(events[0].what, kind::other) << line;
  }
}

TEST(materialise_progress, a_cut_last_line_is_malformed_and_an_overlong_one_is_cut) {
  auto events = parse_all("@ferry begin ab download 0\n@ferry end ab downl");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].what, kind::begin);
  EXPECT_EQ(events[1].what, kind::malformed);
  EXPECT_EQ(events[1].text, "@ferry end ab downl");
  // A whole line without its newline is still cut: the script ends every line.
  events = parse_all("@ferry ready /x");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].what, kind::malformed);

  const std::string huge = "@ferry fail ab unzip 0 " + std::string(progress_parser::max_line * 3, 'x');
  progress_parser p;
  events = p.feed(huge.substr(0, 1000));
  EXPECT_TRUE(events.empty());
  for (auto& e : p.feed(huge.substr(1000) + "\n@ferry cached ab\n")) events.push_back(e);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].what, kind::malformed);
  EXPECT_EQ(events[0].text.size(), progress_parser::max_line);
  EXPECT_EQ(events[1].what, kind::cached);
  EXPECT_TRUE(p.finish().empty());
}

// ---------------------------------------------------------------------------------------------------------
// The script.

materialise_options test_options() {
  materialise_options o;
  o.connect_timeout = 5s;
  o.download_timeout = 60s;
  o.download_attempts = 2;
  o.lock_timeout = 60s;
  o.parallelism = 3;
  return o;
}

const std::string hex64 = std::string(64, 'a');

environment_plan hostile_plan() {
  environment_plan plan;
  plan.cache_dir = "/tmp/it's $(touch /tmp/ferry-pwned) `id` dir";
  plan.cache_cap = 1 << 20;
  plan.layers.push_back({"0123abcd", "work\nspace $(touch /tmp/ferry-pwned)",
                         {{"http://h/k?a=b&c=$(touch /tmp/ferry-pwned)'\"`x`", hex64, 10},
                          {"http://h/k2;rm -rf /", std::string(64, 'B'), 20}}});
  plan.layers.push_back({"ffee", "empty", {}});
  plan.layers.push_back({"0123abcd", "again", {}});  // the same id: sent once
  plan.workspace = 0;
  return plan;
}

std::string script_file(const test::temp_dir& dir, const std::string& text) {
  return dir.write("materialise.sh", text).string();
}

environment_plan ordinary_plan() {
  environment_plan plan;
  plan.layers.push_back({"0123abcd", "workspace",
                         {{"http://10.200.0.1:9000/b/p/layers/01.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=3600",
                           hex64, 10}}});
  plan.layers.push_back({"ffee", "numpy", {}});
  plan.workspace = 0;
  return plan;
}

TEST(materialise_script, parses_under_dash_and_bash_and_passes_shellcheck) {
  test::temp_dir dir;
  for (const auto& plan : {ordinary_plan(), environment_plan{}, hostile_plan()}) {
    const auto file = script_file(dir, materialise_script(plan, test_options()));
    // Every remark counts, except in the hostile plan, whose values are meant to look like code to
    // shellcheck (SC2016, "expressions don't expand in single quotes": exactly what they are there for).
    const bool hostile = plan.cache_dir.find('$') != std::string::npos;
    for (const auto& shell : {"dash", "bash"}) {
      auto r = test::run({shell, "-n", file});
      EXPECT_EQ(r.exit_code, 0) << shell << ": " << r.err;
    }
    if (test::run({"sh", "-c", "command -v shellcheck"}).exit_code != 0) {
      std::cout << "shellcheck is not installed: not run\n";
      continue;
    }
    for (const auto& dialect : {"sh", "dash"}) {
      auto r = test::run({"shellcheck", "-s", dialect, "--severity", hostile ? "warning" : "style", file});
      EXPECT_EQ(r.exit_code, 0) << dialect << ":\n" << r.out << r.err;
    }
  }
}

// The plan's values reach the node's shell byte for byte, as data: the script's own for_each_layer prints them.
TEST(materialise_script, plan_values_arrive_as_data_byte_for_byte) {
  test::temp_dir dir;
  fs::remove("/tmp/ferry-pwned");
  const auto plan = hostile_plan();
  const auto text = materialise_script(plan, test_options());
  const auto preamble = text.substr(0, text.find("# ---- The fixed part"));
  const auto file = script_file(
      dir, preamble + "show() { printf '%s\\0' \"$@\"; printf '|'; }\nfor_each_layer show\n"
                      "printf '%s\\0' \"$cache_dir\" \"$workspace_id\" \"$plan_ids\" \"$cache_cap\" \"$parallelism\" "
                      "\"$download_retries\"\n");
  auto r = test::run({"dash", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string nul(1, '\0');
  const auto& l0 = plan.layers[0];
  const auto expected = l0.id + nul + l0.shards[0].url + nul + hex64 + nul + "10" + nul + l0.shards[1].url + nul +
                        std::string(64, 'b') + nul + "20" + nul + "|" + "ffee" + nul + "|" + plan.cache_dir + nul +
                        "0123abcd" + nul + "0123abcd ffee" + nul + "1048576" + nul + "3" + nul + "1" + nul;
  EXPECT_EQ(r.out, expected);
  EXPECT_FALSE(fs::exists("/tmp/ferry-pwned"));
  // The name is a comment only, cut to printable characters.
  EXPECT_NE(preamble.find("# work?space $(touch /tmp/ferry-pwned)\n"), std::string::npos);
}

TEST(materialise_script, plans_that_cannot_be_sent_are_refused_naming_the_layer) {
  auto check = [](environment_plan plan) {
    diagnostics diag;
    auto r = check_plan(plan, diag);
    EXPECT_FALSE(r);
    if (!r) {
      EXPECT_EQ(r.error(), errc::invalid_plan);
    }
    return diag.message;
  };
  environment_plan plan;
  plan.layers.push_back({"../etc", "numpy", {}});
  EXPECT_NE(check(plan).find("numpy"), std::string::npos);
  plan.layers[0] = {"ab", "numpy", {{"http://h/k", "abc", 1}}};
  EXPECT_NE(check(plan).find("shard 1 of layer numpy"), std::string::npos);
  plan.layers[0] = {"ab", "numpy", {{"http://h/\nk", hex64, 1}}};
  EXPECT_NE(check(plan).find("numpy"), std::string::npos);
  plan.layers[0] = {"ab", "numpy", {}};
  plan.workspace = 1;
  EXPECT_NE(check(plan).find("workspace"), std::string::npos);
  plan.workspace.reset();
  plan.cache_dir = "/a\nb";
  EXPECT_NE(check(plan).find("line break"), std::string::npos);
  plan.cache_dir.clear();
  diagnostics diag;
  EXPECT_TRUE(check_plan(plan, diag));
}

TEST(materialise_script, options_come_from_config) {
  test::temp_dir home;
  auto s = test::default_settings(home.path());
  const auto o = materialise_options::from(s);
  EXPECT_EQ(o.download_timeout, s.agent.download_timeout);
  EXPECT_EQ(o.lock_timeout, s.agent.cache_lock_timeout);
  EXPECT_EQ(o.parallelism, s.agent.download_parallelism);
  EXPECT_EQ(o.connect_timeout, s.net.connect_timeout);
  EXPECT_EQ(o.download_attempts, s.net.retry.max_attempts);
  EXPECT_GT(o.download_timeout.count(), 0);
  EXPECT_GT(o.lock_timeout.count(), 0);
  EXPECT_GT(o.parallelism, 0);
}

// ---------------------------------------------------------------------------------------------------------
// On a node: a real sshd on this machine, and moto holding the zips.

struct file_spec {
  std::string path;
  std::string content;
  fs::perms mode = fs::perms(0644);
  std::string link;  // non-empty: a symlink to this
};

std::string random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

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

  // A zip of `files`, made by Info-ZIP's zip from a real tree (modes and symlinks as it stores them).
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
      auto r = test::run({"zip", "-qry", out.string(), "."}, o);
      if (r.exit_code != 0) throw std::runtime_error(r.out + r.err);
    }
    return test::read_file(out);
  }

  // Stores `zip` in moto and describes it as a shard: a presigned URL, its digest and size.
  shard_source store(const std::string& key, const std::string& zip) {
    diagnostics diag;
    auto put = run([](materialise_node& t, std::string k, const std::string& bytes,
                      diagnostics& d) -> asio::awaitable<result<std::string>> {
      net::request_body body = std::span<const char>(bytes.data(), bytes.size());
      const std::string b = bucket;
      co_return co_await t.s3_->s3->put_object(t.trace.root(), b, k, std::move(body), d);
    }(*this, key, zip, diag));
    if (!put) throw std::runtime_error(diag.message);
    return {s3_->s3->presign_get(bucket, key), net::hex_sha256(zip), zip.size()};
  }

  // A layer of one shard per group of files; its id is made up from the test, name and contents.
  layer_source layer(const std::string& name, const std::vector<std::vector<file_spec>>& shards) {
    layer_source l;
    l.name = name;
    std::string seed = prefix_ + "/" + name;
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const auto zip = zip_of(shards[i]);
      l.shards.push_back(store(fmt::format("{}/{}-{}.zip", prefix_, name, i), zip));
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
    auto r = co_await materialise(trace.root(), **session, plan, o, diag);
    (*session)->close();
    co_return r;
  }

  result<environment> materialise_now(const environment_plan& plan, diagnostics& diag,
                                      const materialise_options& o = test_options()) {
    return run(materialise_on(plan, o, diag));
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
    for (const auto* sub : {"layers", "downloads"}) {
      if (!fs::exists(cache() / sub)) continue;
      for (const auto& e : fs::directory_iterator(cache() / sub)) {
        const auto name = e.path().filename().string();
        if (std::string(sub) == "downloads" || name.find(".tmp.") != std::string::npos) out.push_back(name);
      }
    }
    return out;
  }

  // The end messages (or start messages, for actions that never ended) of actions of `type`.
  std::vector<json::object> actions(std::string_view type) {
    std::vector<json::object> out;
    std::istringstream in(trace_text());
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

  static inline const std::vector<std::string> base_tools = {"mkdir", "rm",   "mv",    "cat",  "ls",
                                                             "du",    "cut",  "tr",    "head", "tail",
                                                             "touch", "sleep", "wc",   "grep"};

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

  // The trace: each layer, with a download, verify and unzip per shard, all succeeded.
  EXPECT_EQ(count_status("ferry:materialise", "succeeded"), 1u);
  EXPECT_EQ(count_status("ferry:materialise:lock", "succeeded"), 1u);
  EXPECT_EQ(count_status("ferry:materialise:layer", "succeeded"), 4u);
  EXPECT_EQ(count_status("ferry:materialise:download", "succeeded"), 4u);
  EXPECT_EQ(count_status("ferry:materialise:verify", "succeeded"), 4u);
  EXPECT_EQ(count_status("ferry:materialise:unzip", "succeeded"), 4u);
  EXPECT_EQ(started_with_node("ferry:materialise"), "node-1");
  // Neither the script nor its URLs reach the trace.
  EXPECT_EQ(trace_text().find("X-Amz-Signature="), std::string::npos);

  // Again: nothing is downloaded, and the markers were touched.
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
  EXPECT_EQ(count_status("ferry:materialise:download", "succeeded"), 4u);
  EXPECT_EQ(count_status("ferry:materialise:layer", "succeeded"), 8u);
  std::size_t cached = 0;
  for (const auto& a : actions("ferry:materialise:layer")) cached += a.contains("cached") && a.at("cached").as_bool();
  EXPECT_EQ(cached, 4u);
  // eliot rebuilds complete trees from it.
  trace.root().succeed();
  trace_text();
  const auto tasks = test::eliot_parse({trace.file()});
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].at("complete").as_bool());
}

// The script goes through stdin: a plan far larger than one argument may be (128 KiB on Linux) still
// arrives whole. Its layers are cached already (made here), so their URLs are never fetched.
TEST_F(materialise_node, a_large_plan_travels_on_stdin) {
  environment_plan plan = plan_of({});
  const std::string long_url = "http://127.0.0.1:9/never/fetched?" + std::string(400, 'q');
  for (int i = 0; i < 1000; ++i) {
    layer_source l{net::hex_sha256(fmt::format("{}/{}", prefix_, i)), fmt::format("layer-{}", i),
                   {{long_url, hex64, 1}}};
    fs::create_directories(layer_dir(l));
    std::ofstream(marker(l)) << "4096\n";
    plan.layers.push_back(std::move(l));
  }
  const auto script = materialise_script(plan, test_options());
  ASSERT_GT(script.size(), 400000u);
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

TEST_F(materialise_node, a_corrupt_digest_fails_naming_the_layer_and_leaves_nothing) {
  auto good = layer("workspace", workspace_files());
  auto bad = layer("numpy", two_shards());
  const auto wrong = std::string(64, 'e');
  const auto right = bad.shards[1].sha256;
  bad.shards[1].sha256 = wrong;
  diagnostics diag;
  auto r = materialise_now(plan_of({good, bad}, 0), diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::digest_mismatch) << diag.message;
  EXPECT_NE(diag.message.find("node-1"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("layer numpy (" + bad.id.substr(0, 12) + ", shard 2 of 2)"), std::string::npos)
      << diag.message;
  EXPECT_NE(diag.message.find(wrong), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find(right), std::string::npos) << diag.message;
  EXPECT_FALSE(fs::exists(layer_dir(bad)));
  EXPECT_FALSE(fs::exists(marker(bad)));
  EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
  // The other layer is whole and kept for the next run.
  EXPECT_TRUE(fs::exists(marker(good)));
  EXPECT_EQ(count_status("ferry:materialise:verify", "failed"), 1u);
  EXPECT_EQ(count_status("ferry:materialise:layer", "failed"), 1u);
  EXPECT_EQ(count_status("ferry:materialise", "failed"), 1u);
  for (const auto& a : actions("ferry:materialise:verify")) {
    if (a.at("action_status").as_string() == "failed") {
      EXPECT_NE(std::string(a.at("reason").as_string()).find(wrong), std::string::npos);
    }
  }
}

TEST_F(materialise_node, a_missing_object_fails_the_download_naming_the_layer) {
  auto gone = layer("torch", {{{"torch/__init__.py", "T = 1\n"}}});
  gone.shards[0].url = s3_->s3->presign_get(bucket, prefix_ + "/no-such-key.zip");
  diagnostics diag;
  auto r = materialise_now(plan_of({gone}), diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::download_failed) << diag.message;
  EXPECT_NE(diag.message.find("downloading layer torch (" + gone.id.substr(0, 12) + ")"), std::string::npos)
      << diag.message;
  EXPECT_NE(diag.message.find("404"), std::string::npos) << diag.message;
  EXPECT_FALSE(fs::exists(layer_dir(gone)));
  EXPECT_FALSE(fs::exists(marker(gone)));
  EXPECT_TRUE(leftovers().empty());
  EXPECT_EQ(count_status("ferry:materialise:download", "failed"), 1u);
}

asio::awaitable<void> materialise_into(materialise_node& t, const environment_plan& plan, result<environment>& out,
                                       diagnostics& diag) {
  co_await net::accept_cancellation();
  out = co_await t.materialise_on(plan, test_options(), diag);
}

TEST_F(materialise_node, two_runs_at_once_share_the_cache_and_download_each_layer_once) {
  const auto plan = plan_of({layer("workspace", workspace_files()), layer("alpha", two_shards()),
                             layer("beta", {{{"beta/big", random_bytes(2 << 20, 2)}}})},
                            0);
  result<environment> a = make_error_code(errc::materialise_failed);
  result<environment> b = make_error_code(errc::materialise_failed);
  diagnostics diag_a, diag_b;
  run([](materialise_node& t, const environment_plan& p, result<environment>& ra, result<environment>& rb,
         diagnostics& da, diagnostics& db) -> asio::awaitable<void> {
    std::vector<asio::awaitable<void>> both;
    both.push_back(materialise_into(t, p, ra, da));
    both.push_back(materialise_into(t, p, rb, db));
    co_await net::run_all(std::move(both));
  }(*this, plan, a, b, diag_a, diag_b));
  ASSERT_TRUE(a) << diag_a.message;
  ASSERT_TRUE(b) << diag_b.message;
  EXPECT_EQ(a->layers_fetched + b->layers_fetched, 3u);
  EXPECT_EQ(a->layers_cached + b->layers_cached, 3u);
  EXPECT_EQ(a->python_path, b->python_path);
  EXPECT_EQ(a->workdir, b->workdir);
  for (const auto* key : {"workspace-0", "alpha-0", "alpha-1", "beta-0"}) EXPECT_EQ(gets_of(key), 1u) << key;
  EXPECT_EQ(count_status("ferry:materialise:download", "succeeded"), 4u);
  EXPECT_EQ(count_status("ferry:materialise", "succeeded"), 2u);
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
  EXPECT_NE(trace_text().find("\"ferry:materialise:evicted\",\"layer\":\"" + b.id + "\""), std::string::npos);

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

TEST_F(materialise_node, a_node_without_curl_is_told_what_to_install) {
  auto tools = base_tools;
  for (const auto* t : {"unzip", "sha256sum", "flock"}) tools.push_back(t);
  const auto bin = bin_with(tools);
  auto o = test_options();
  o.shell_command = fmt::format("PATH={} /bin/sh -s", bin.string());
  diagnostics diag;
  auto r = materialise_now(plan_of({layer("alpha", two_shards())}), diag, o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::node_lacks_tools);
  EXPECT_EQ(diag.message, "node node-1 lacks curl: install it (e.g. apt-get install curl)");

  const auto bare = bin_with({});
  o.shell_command = fmt::format("PATH={} /bin/sh -s", bare.string());
  r = materialise_now(plan_of({layer("alpha", two_shards())}), diag, o);
  ASSERT_FALSE(r);
  EXPECT_EQ(diag.message,
            "node node-1 lacks curl, unzip (or python3) and sha256sum (or python3): install them "
            "(e.g. apt-get install curl unzip coreutils)");
}

// Without unzip, sha256sum and flock: python3 extracts (modes and symlinks too) and hashes, and an mkdir
// lock stands in for flock.
TEST_F(materialise_node, python3_and_an_mkdir_lock_stand_in_for_unzip_sha256sum_and_flock) {
  auto tools = base_tools;
  for (const auto* t : {"curl", "python3"}) tools.push_back(t);
  const auto bin = bin_with(tools);
  auto o = test_options();
  o.shell_command = fmt::format("PATH={} /bin/sh -s", bin.string());
  const auto plan = plan_of({layer("workspace", workspace_files()), layer("alpha", two_shards()), layer("e", {{}})}, 0);
  diagnostics diag;
  auto r = materialise_now(plan, diag, o);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->layers_fetched, 3u);
  expect_workspace(r->workdir);
  EXPECT_EQ(mode_of(layer_dir(plan.layers[1]) / "alpha" / "tool"), 0750u);
  EXPECT_FALSE(fs::exists(cache() / "lock.d"));
  EXPECT_FALSE(fs::exists(cache() / "lock"));
  // A lock left by a run that died is broken; one held by a live process is waited for, up to the deadline.
  fs::create_directories(cache() / "lock.d");
  std::ofstream(cache() / "lock.d" / "pid") << "999999999\n";
  auto again = materialise_now(plan, diag, o);
  ASSERT_TRUE(again) << diag.message;
  EXPECT_EQ(again->layers_cached, 3u);
  // Pid 1 of the server's pid namespace (where the node's commands run) is alive as long as the server.
  fs::create_directories(cache() / "lock.d");
  std::ofstream(cache() / "lock.d" / "pid") << "1\n";
  o.lock_timeout = 1s;
  auto blocked = materialise_now(plan, diag, o);
  ASSERT_FALSE(blocked);
  EXPECT_EQ(blocked.error(), errc::cache_lock_timeout);
  EXPECT_NE(diag.message.find("lock.d"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("agent.cache_lock_timeout"), std::string::npos) << diag.message;
  EXPECT_TRUE(fs::exists(cache() / "lock.d" / "pid"));  // not ours to remove
  EXPECT_EQ(count_status("ferry:materialise:lock", "failed"), 1u);
}

TEST_F(materialise_node, a_held_flock_times_out_naming_the_setting) {
  fs::create_directories(cache());
  // Holds the lock in the process the test kills (sh execs into sleep), and says so once it does.
  const auto lock = (cache() / "lock").string();
  auto holder = test::spawn({"sh", "-c", "exec 9>>\"$1\" && flock 9 && : >\"$1.held\" && exec sleep 30", "sh", lock});
  for (int i = 0; i < 1000 && !fs::exists(lock + ".held"); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(fs::exists(lock + ".held"));
  auto o = test_options();
  o.lock_timeout = 500ms;
  diagnostics diag;
  auto r = materialise_now(plan_of({layer("alpha", two_shards())}), diag, o);
  holder->signal(SIGKILL);
  holder->wait();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::cache_lock_timeout) << diag.message;
  EXPECT_NE(diag.message.find("0.5s"), std::string::npos) << diag.message;
}

class materialise_shells : public materialise_node, public ::testing::WithParamInterface<std::string> {};

// Debian's /bin/sh is dash; the script is POSIX sh, so bash in POSIX mode runs it too.
TEST_P(materialise_shells, the_script_runs_under) {
  if (GetParam() == "sh") {
    std::error_code ec;
    const auto target = fs::read_symlink("/bin/sh", ec);
    std::cout << "/bin/sh is " << (ec ? "not a link" : target.string()) << "\n";
  }
  auto o = test_options();
  o.shell_command = GetParam() + " -s";
  if (GetParam() == "bash") o.shell_command = "bash --posix -s";
  const auto plan = plan_of({layer("workspace", workspace_files()), layer("alpha", two_shards())}, 0);
  diagnostics diag;
  auto r = materialise_now(plan, diag, o);
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->layers_fetched, 2u);
  expect_workspace(r->workdir);
  auto again = materialise_now(plan, diag, o);
  ASSERT_TRUE(again) << diag.message;
  EXPECT_EQ(again->layers_cached, 2u);
}

INSTANTIATE_TEST_SUITE_P(materialise, materialise_shells, ::testing::Values("sh", "dash", "bash"));

// Polls the node's cache until the download of `id` has bytes in it.
asio::awaitable<void> until_downloading(fs::path part) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  for (;;) {
    std::error_code ec;
    if (fs::exists(part, ec) && fs::file_size(part, ec) > 0 && !ec) co_return;
    timer.expires_after(20ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

TEST_F(materialise_node, cancelled_mid_download_leaves_no_half_layer_and_the_trace_ends_cancelled) {
  using namespace asio::experimental::awaitable_operators;
  const auto small = layer("workspace", workspace_files());
  auto big = layer("big", {{{"big.bin", random_bytes(4 << 20, 6)}}});
  // The big one comes through a proxy that holds back every chunk.
  test::fault_proxy proxy("127.0.0.1", moto_->port());
  proxy.set_delay(100ms);
  auto& url = big.shards[0].url;
  const auto at = fmt::format("127.0.0.1:{}", moto_->port());
  url.replace(url.find(at), at.size(), fmt::format("127.0.0.1:{}", proxy.port()));
  auto plan = plan_of({small, big}, 0);
  auto o = test_options();
  o.parallelism = 1;
  diagnostics diag;
  const auto part = cache() / "downloads" / (big.id + ".0.zip");
  auto outcome = run([](materialise_node& t, const environment_plan& p, const materialise_options& opts,
                        fs::path watched, diagnostics& d) -> asio::awaitable<int> {
    auto work = t.materialise_on(p, opts, d);
    auto watch = until_downloading(std::move(watched));
    auto raced = co_await (std::move(work) || std::move(watch));
    if (raced.index() == 0) co_return std::get<0>(raced) ? 0 : 1;  // ended before the download began
    co_return 2;
  }(*this, plan, o, part, diag));
  ASSERT_EQ(outcome, 2) << diag.message;
  EXPECT_GT(proxy.bytes_downloaded(), 0u);
  EXPECT_FALSE(fs::exists(layer_dir(big)));
  EXPECT_FALSE(fs::exists(marker(big)));
  EXPECT_TRUE(leftovers().empty()) << fmt::format("{}", fmt::join(leftovers(), " "));
  EXPECT_TRUE(fs::exists(marker(small)));  // finished before: kept
  // No process of the script is left on the node.
  for (const pid_t pid : server.processes()) {
    const auto cmdline = test::read_file("/proc/" + std::to_string(pid) + "/cmdline");
    EXPECT_EQ(cmdline.find("curl"), std::string::npos) << cmdline;
  }
  const auto ends = actions("ferry:materialise");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].at("action_status").as_string(), "failed");
  EXPECT_EQ(ends[0].at("reason").as_string(), "cancelled");
  bool download_cancelled = false;
  for (const auto& a : actions("ferry:materialise:download"))
    download_cancelled |= a.at("action_status").as_string() == "failed" && a.at("reason").as_string() == "cancelled";
  EXPECT_TRUE(download_cancelled) << trace_text();

  // The next run finds the cache sound and fetches the big layer whole.
  proxy.set_delay(0ms);
  auto next = materialise_now(plan, diag, o);
  ASSERT_TRUE(next) << diag.message;
  EXPECT_EQ(next->layers_fetched, 1u);
  EXPECT_EQ(test::read_file(layer_dir(big) / "big.bin"), random_bytes(4 << 20, 6));
}

}  // namespace
}  // namespace ferry::agent
