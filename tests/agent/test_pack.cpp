// `ferry pack` end to end: a real venv's interpreter, a real moto_server checking signatures, and the
// aws CLI, unzip and Python's zipfile reading back what ferry stored.
#include "agent/cli/report.hpp"
#include "support/eliot.hpp"
#include "support/fault_proxy.hpp"
#include "support/loopback_listener.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/random_bytes.hpp"
#include "support/temp_dir.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <thread>
#include <set>
#include <sys/stat.h>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Files "at rest": an hour old, so the hash cache may keep them (fresh files are re-hashed on purpose).
void age(const fs::path& path) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(1));
}

// The keys of the multipart uploads under way in moto's bucket "packs", as the aws CLI lists them.
std::string multipart_keys(const moto_server& moto) {
  const auto r = moto.aws({"s3api", "list-multipart-uploads", "--bucket", "packs", "--query", "Uploads[].Key",
                           "--output", "text"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

class pack_cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    moto_ = new moto_server(moto_options{.auth = true});
    moto_->make_bucket("packs");
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }

  void SetUp() override {
    const auto made = run({system_python, "-m", "venv", "--without-pip", (venv_ / "env").string()});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    site_ = venv_ / "env" / "lib" / "python3.11" / "site-packages";
    ASSERT_TRUE(fs::is_directory(site_)) << site_;
    install("alpha", "1.0", {{"alpha/__init__.py", "A = 1\n"}, {"alpha/data.txt", "alpha data\n"}});
    install("beta", "1.0", {{"beta/__init__.py", "B = 1\n"}});
    write_workspace(ws_);
    prefix_ = fmt::format("{}/", ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  void install(const std::string& name, const std::string& version,
               const std::vector<std::pair<std::string, std::string>>& files) {
    std::string record;
    for (const auto& [path, text] : files) {
      age(venv_.write("env/lib/python3.11/site-packages/" + path, text));
      record += path + ",,\n";
    }
    const auto info = fmt::format("{}-{}.dist-info", name, version);
    record += info + "/RECORD,,\n";
    age(venv_.write(fmt::format("env/lib/python3.11/site-packages/{}/RECORD", info), record));
  }

  static void write_workspace(const temp_dir& ws) {
    ws.write("train.py", "print('train')\n");
    ws.write("pkg/model.py", "W = [1, 2, 3]\n");
    ws.write("run.sh", "#!/bin/sh\necho run\n");
    fs::permissions(ws / "run.sh", fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
    ws.write(std::string("caf\xe9.txt"), "latin-1 name\n");
    ws.write(".gitignore", "*.log\n");
    ws.write("debug.log", "not shipped\n");
    ws.write(".git/HEAD", "ref: refs/heads/main\n");
    fs::create_symlink("pkg/model.py", ws / "model_link.py");
    for (const auto& e : fs::recursive_directory_iterator(ws.path())) {
      if (!e.is_symlink()) age(e.path());
    }
  }

  process_options env_for(const temp_dir& ws, const std::string& prefix) const {
    auto options = moto_->process_env();
    options.cwd = ws.path();
    options.env["FERRY_STORAGE_URL"] = "s3://packs/" + prefix;
    options.env["FERRY_PACKAGING_PYTHON"] = (venv_ / "env" / "bin" / "python").string();
    if (!codec_.empty()) options.env["FERRY_PACKAGING_CODEC"] = codec_;
    use_home(options, state_.path());
    options.unset_env.push_back("PYTHONPATH");
    return options;
  }

  // Runs `ferry pack --json` and returns the report.
  json::object pack(const temp_dir& ws, const std::string& prefix, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"pack", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_ferry(args, env_for(ws, prefix));
    EXPECT_EQ(r.exit_code, 0) << r.err << "\n" << moto_->log();
    if (r.exit_code != 0) return {};
    return json::parse(r.out).as_object();
  }
  json::object pack() { return pack(ws_, prefix_); }

  static std::set<std::string> layers_with(const json::object& report, std::string_view status) {
    std::set<std::string> out;
    for (const auto& l : report.at("layers").as_array()) {
      if (l.at("status").as_string() == status) out.insert(std::string(l.at("name").as_string()));
    }
    return out;
  }

  // The key of the layer's first shard with the codec packed (codec_, else the default: zstd).
  std::string shard_key(const json::object& report, const std::string& prefix, std::string_view layer) const {
    for (const auto& l : report.at("layers").as_array()) {
      if (l.at("name").as_string() == layer) {
        return fmt::format("{}layers/{}{}", prefix, std::string(l.at("shards").as_array().at(0).at("id").as_string()),
                           codec_ == "deflate" ? ".zip" : ".zstd.zip");
      }
    }
    return {};
  }

  fs::path download(const std::string& key, const fs::path& to) const {
    const auto r = moto_->aws({"s3", "cp", "s3://packs/" + key, to.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return to;
  }

  // The manifest a report names, as stored, read with the aws CLI.
  std::string stored_manifest(const json::object& report) {
    const std::string url(report.at("manifest").as_string());
    const auto to = scratch_ / fmt::format("manifest-{}.json", downloads_++);
    const auto r = moto_->aws({"s3", "cp", url, to.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_file(to);
  }

  void remove(const std::string& key) const {
    const auto r = moto_->aws({"s3", "rm", "s3://packs/" + key});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }

  static std::string sha256sum(const fs::path& file) {
    const auto r = run({"sha256sum", file.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, 64);
  }

  // Shard id -> sha256 as the --json report gives them.
  static std::map<std::string, std::string> report_digests(const json::object& report) {
    std::map<std::string, std::string> out;
    for (const auto& l : report.at("layers").as_array()) {
      for (const auto& s : l.at("shards").as_array()) {
        const auto& sha = s.at("sha256");
        out[std::string(s.at("id").as_string())] = sha.is_string() ? std::string(sha.as_string()) : "null";
      }
    }
    return out;
  }

  static moto_server* moto_;
  temp_dir venv_, ws_, state_, scratch_;
  fs::path site_;
  std::string prefix_;
  std::string codec_;  // FERRY_PACKAGING_CODEC for ferry pack; empty: the configured default
  int downloads_ = 0;
};

moto_server* pack_cli::moto_ = nullptr;

TEST_F(pack_cli, only_changed_layers_upload) {
  const std::set<std::string> all{"workspace", "alpha", "beta"};
  auto first = pack();
  EXPECT_EQ(layers_with(first, "uploaded"), all);
  EXPECT_FALSE(first.at("manifest_present").as_bool());

  auto again = pack();
  EXPECT_TRUE(again.at("manifest_present").as_bool());
  EXPECT_EQ(again.at("uploaded_shards").as_int64(), 0);
  EXPECT_EQ(again.at("hashed_files").as_int64(), 0) << "unchanged files must come from the cache";

  fs::last_write_time(ws_ / "train.py", fs::last_write_time(ws_ / "train.py") + std::chrono::seconds(5));
  auto touched = pack();
  EXPECT_TRUE(touched.at("manifest_present").as_bool()) << "a touch must not change any layer";
  EXPECT_EQ(touched.at("hashed_files").as_int64(), 1);

  auto expect_only = [&](const char* what, std::set<std::string> changed) {
    auto r = pack();
    EXPECT_EQ(layers_with(r, "uploaded"), changed) << what;
    std::set<std::string> rest;
    std::set_difference(all.begin(), all.end(), changed.begin(), changed.end(), std::inserter(rest, rest.end()));
    EXPECT_EQ(layers_with(r, "present"), rest) << what;
  };
  ws_.write("train.py", "print('train harder')\n");
  expect_only("edit", {"workspace"});
  ws_.write("pkg/extra.py", "X = 1\n");
  expect_only("add", {"workspace"});
  fs::remove(ws_ / "pkg" / "extra.py");
  auto back = pack();
  EXPECT_TRUE(back.at("manifest_present").as_bool()) << "deleting the added file gives the earlier manifest back";
  fs::rename(ws_ / "pkg" / "model.py", ws_ / "pkg" / "model2.py");
  expect_only("rename", {"workspace"});
  fs::permissions(ws_ / "train.py", fs::perms::owner_exec, fs::perm_options::add);
  expect_only("chmod", {"workspace"});
  fs::remove_all(site_ / "beta-1.0.dist-info");
  install("beta", "2.0", {{"beta/__init__.py", "B = 2\n"}});
  expect_only("upgrade one package", {"beta"});
  fs::remove(site_ / "alpha" / "data.txt");
  expect_only("delete", {"alpha"});
}

TEST_F(pack_cli, the_aws_cli_unzip_and_python_read_back_the_files) {
  codec_ = "deflate";  // unzip and Python 3.11 cannot read zstd (method 93)
  auto report = pack();
  const auto zip = download(shard_key(report, prefix_, "workspace"), scratch_ / "workspace.zip");
  const auto tested = run({"unzip", "-t", "-q", zip.string()});
  EXPECT_EQ(tested.exit_code, 0) << tested.out << tested.err;
  const auto py = run({system_python, "-c",
                       "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; "
                       "print('\\n'.join(sorted(i.filename for i in z.infolist())))",
                       zip.string()});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  // Python reads a name without the UTF-8 flag as cp437; unzip below checks every name byte for byte.
  EXPECT_EQ(std::count(py.out.begin(), py.out.end(), '\n'), 6) << py.out;
  EXPECT_NE(py.out.find("pkg/model.py\nrun.sh\ntrain.py\n"), std::string::npos) << py.out;
  const auto out = scratch_ / "out";
  const auto extracted = run({"unzip", "-q", zip.string(), "-d", out.string()});
  ASSERT_EQ(extracted.exit_code, 0) << extracted.err;
  std::set<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(out)) {
    if (!e.is_directory() || e.is_symlink()) names.insert(e.path().lexically_relative(out).native());
  }
  EXPECT_EQ(names, (std::set<std::string>{".gitignore", "caf\xe9.txt", "model_link.py", "pkg/model.py", "run.sh",
                                          "train.py"}));
  for (const auto* name : {"train.py", "pkg/model.py", "run.sh", "caf\xe9.txt"}) {
    EXPECT_EQ(read_file(out / name), read_file(ws_ / name)) << name;
    struct stat a {}, b {};
    ASSERT_EQ(::lstat((out / name).c_str(), &a), 0);
    ASSERT_EQ(::lstat((ws_ / name).c_str(), &b), 0);
    EXPECT_EQ(a.st_mode & 0777, b.st_mode & 0777) << name;
  }
  ASSERT_TRUE(fs::is_symlink(out / "model_link.py"));
  EXPECT_EQ(fs::read_symlink(out / "model_link.py"), "pkg/model.py");

  // And back: what the aws CLI uploads, ferry's own storage command reads.
  const auto manifest = std::string(report.at("manifest").as_string());
  const auto copy = run_ferry({"storage", "cp", manifest, (scratch_ / "manifest.json").string()},
                              env_for(ws_, prefix_));
  ASSERT_EQ(copy.exit_code, 0) << copy.err;
  const auto doc = json::parse(read_file(scratch_ / "manifest.json")).as_object();
  EXPECT_EQ(doc.at("format").as_string(), "ferry-manifest-v1");
  const auto& layers = doc.at("layers").as_array();
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0].at("name").as_string(), "workspace");
  EXPECT_EQ(layers[0].at("root").as_int64(), 0);
  EXPECT_EQ(layers[1].at("root").as_int64(), 1);
  EXPECT_TRUE(doc.at("python").at("version").as_string().starts_with("3.11.")) << doc;
}

TEST_F(pack_cli, the_manifest_holds_the_sha256_of_every_stored_zip) {
  auto report = pack();
  const auto text = stored_manifest(report);
  const auto doc = json::parse(text).as_object();
  const auto from_report = report_digests(report);
  std::size_t shards = 0;
  for (const auto& l : doc.at("layers").as_array()) {
    for (const auto& s : l.at("shards").as_array()) {
      const std::string key(s.at("key").as_string());
      const std::string sha(s.at("sha256").as_string());
      const auto zip = download(key, scratch_ / fmt::format("shard-{}.zip", shards++));
      EXPECT_EQ(sha256sum(zip), sha) << key;
      EXPECT_EQ(static_cast<std::int64_t>(fs::file_size(zip)), s.at("zip_bytes").as_int64()) << key;
      EXPECT_EQ(from_report.at(std::string(s.at("id").as_string())), sha) << "--json gives the manifest's digest";
      const auto sidecar = download(key + ".sha256", scratch_ / fmt::format("shard-{}.sha256", shards));
      EXPECT_EQ(read_file(sidecar), fmt::format("{} {}\n", sha, fs::file_size(zip))) << key;
    }
  }
  EXPECT_EQ(shards, 3u);
}

TEST_F(pack_cli, digests_come_from_the_manifest_the_local_cache_or_the_sidecars_and_a_zip_without_one_goes_up_again) {
  const std::set<std::string> all{"workspace", "alpha", "beta"};
  auto first = pack();
  EXPECT_EQ(layers_with(first, "uploaded"), all);
  const auto manifest = stored_manifest(first);
  const auto digests = report_digests(first);
  ASSERT_EQ(digests.size(), 3u);
  const auto cache_file = state_ / "cache" / "ferry" / "zip-digests";
  ASSERT_TRUE(fs::exists(cache_file));
  const std::string manifest_key(first.at("manifest").as_string().subview(std::string_view("s3://packs/").size()));

  // Warm: the stored manifest, digests and all, and nothing uploaded.
  auto warm = pack();
  EXPECT_TRUE(warm.at("manifest_present").as_bool());
  EXPECT_EQ(warm.at("uploaded_shards").as_int64(), 0);
  EXPECT_EQ(report_digests(warm), digests);

  // No local cache and no manifest: every digest from the zips' sidecars, still nothing uploaded.
  fs::remove(cache_file);
  remove(manifest_key);
  auto from_sidecars = pack();
  EXPECT_FALSE(from_sidecars.at("manifest_present").as_bool());
  EXPECT_EQ(from_sidecars.at("uploaded_shards").as_int64(), 0);
  EXPECT_EQ(report_digests(from_sidecars), digests);
  EXPECT_EQ(stored_manifest(from_sidecars), manifest);
  EXPECT_TRUE(fs::exists(cache_file)) << "what the sidecars said is cached again";

  // One sidecar gone (as if an older ferry stored the zip), and no local cache: that shard goes up again.
  fs::remove(cache_file);
  remove(manifest_key);
  remove(shard_key(first, prefix_, "alpha") + ".sha256");
  auto resent = pack();
  EXPECT_EQ(layers_with(resent, "uploaded"), std::set<std::string>{"alpha"});
  EXPECT_EQ(resent.at("uploaded_shards").as_int64(), 1);
  EXPECT_EQ(stored_manifest(resent), manifest);
  download(shard_key(first, prefix_, "alpha") + ".sha256", scratch_ / "alpha.sha256");

  // A zip gone: uploaded again although the local cache knows its digest.
  remove(manifest_key);
  remove(shard_key(first, prefix_, "workspace"));
  auto again = pack();
  EXPECT_EQ(layers_with(again, "uploaded"), std::set<std::string>{"workspace"});
  EXPECT_EQ(stored_manifest(again), manifest);
}

TEST_F(pack_cli, a_deflate_store_and_a_zstd_store_live_side_by_side_under_one_prefix) {
  const std::set<std::string> all{"workspace", "alpha", "beta"};
  codec_ = "zstd";
  auto zstd = pack();
  EXPECT_EQ(layers_with(zstd, "uploaded"), all);
  codec_ = "deflate";
  auto deflate = pack();
  EXPECT_EQ(layers_with(deflate, "uploaded"), all) << "a zstd zip is never taken for the deflate one";
  EXPECT_NE(deflate.at("manifest").as_string(), zstd.at("manifest").as_string()) << "each codec its own manifest";

  // Both zips of each layer are stored, each under its codec's key, with its sidecar, and read as such.
  for (const auto* layer : {"workspace", "alpha", "beta"}) {
    codec_ = "zstd";
    const auto zstd_key = shard_key(zstd, prefix_, layer);
    codec_ = "deflate";
    const auto deflate_key = shard_key(deflate, prefix_, layer);
    ASSERT_TRUE(zstd_key.ends_with(".zstd.zip")) << zstd_key;
    ASSERT_NE(zstd_key, deflate_key);
    const auto z = download(zstd_key, scratch_ / (std::string(layer) + ".zstd.zip"));
    const auto d = download(deflate_key, scratch_ / (std::string(layer) + ".zip"));
    download(zstd_key + ".sha256", scratch_ / (std::string(layer) + ".zstd.zip.sha256"));
    download(deflate_key + ".sha256", scratch_ / (std::string(layer) + ".zip.sha256"));
    const auto listed = run({"bsdtar", "-tvf", z.string()});
    EXPECT_EQ(listed.exit_code, 0) << listed.err;
    const auto tested = run({"unzip", "-t", "-q", d.string()});
    EXPECT_EQ(tested.exit_code, 0) << tested.out << tested.err;
    const auto methods = run({system_python, "-c",
                              "import sys, zipfile\n"
                              "for f in sys.argv[1:]: print(sorted({i.compress_type for i in zipfile.ZipFile(f).infolist()}))",
                              z.string(), d.string()});
    ASSERT_EQ(methods.exit_code, 0) << methods.err;
    EXPECT_NE(methods.out.find("93"), std::string::npos) << layer << ": " << methods.out;
    EXPECT_EQ(methods.out.substr(methods.out.find('\n') + 1).find("93"), std::string::npos) << layer << ": " << methods.out;
  }

  // Each codec finds its own manifest again: nothing uploaded, whichever packed last.
  for (const auto* codec : {"zstd", "deflate"}) {
    codec_ = codec;
    auto again = pack();
    EXPECT_TRUE(again.at("manifest_present").as_bool()) << codec;
    EXPECT_EQ(again.at("uploaded_shards").as_int64(), 0) << codec;
  }
  // Without the manifests, each codec's shards are found under its own keys with their own digests.
  for (const auto& report : {zstd, deflate}) {
    const std::string url(report.at("manifest").as_string());
    remove(url.substr(std::string_view("s3://packs/").size()));
  }
  for (const auto& [codec, report] : {std::pair<std::string, json::object>{"zstd", zstd}, {"deflate", deflate}}) {
    codec_ = codec;
    auto again = pack();
    EXPECT_EQ(again.at("uploaded_shards").as_int64(), 0) << codec;
    EXPECT_EQ(report_digests(again), report_digests(report)) << codec;
  }
}

TEST_F(pack_cli, one_tree_at_two_paths_gives_identical_zip_bytes) {
  temp_dir other;
  write_workspace(other);
  auto a = pack(ws_, prefix_ + "a/");
  auto b = pack(other, prefix_ + "b/");
  const auto za = download(shard_key(a, prefix_ + "a/", "workspace"), scratch_ / "a.zip");
  const auto zb = download(shard_key(b, prefix_ + "b/", "workspace"), scratch_ / "b.zip");
  const auto bytes_a = read_file(za);
  ASSERT_FALSE(bytes_a.empty());
  EXPECT_TRUE(bytes_a == read_file(zb)) << "zips of the same tree differ";
}

TEST_F(pack_cli, a_layer_over_the_cap_is_refused_unless_forced) {
  ws_.write("big.bin", std::string(64 << 10, 'x'));
  auto options = env_for(ws_, prefix_);
  options.env["FERRY_PACKAGING_MAX_LAYER_SIZE"] = "32KiB";
  const auto refused = run_ferry({"pack"}, options);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("layer workspace"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  const auto listed = moto_->aws({"s3", "ls", "--recursive", "s3://packs/" + prefix_});
  EXPECT_EQ(listed.out, "") << "nothing may be uploaded when a layer is refused";
  const auto forced = run_ferry({"pack", "--force"}, options);
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
}

TEST_F(pack_cli, an_unreadable_file_is_an_error_that_names_it) {
  // Root reads everything, so this runs ferry as nobody on a tree nobody may enter but for one file.
  temp_dir ws;
  ws.write("ok.py", "ok\n");
  const auto secret = ws.write("secret.py", "no\n");
  fs::permissions(secret, fs::perms::none);
  fs::permissions(ws.path(), fs::perms::all);
  fs::permissions(state_.path(), fs::perms::all);
  auto options = env_for(ws, prefix_);
  options.env["FERRY_PACKAGING_PYTHON"] = system_python;
  options.env["FERRY_PACKAGING_SHIP_SITE_PACKAGES"] = "false";
  std::vector<std::string> argv{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", FERRY_BINARY,
                                "pack", "--dry-run"};
  const auto r = run(argv, options);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("secret.py"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
}

TEST_F(pack_cli, explain_names_the_rule_and_dry_run_uploads_nothing) {
  const auto r = run_ferry({"pack", "--explain", "debug.log", "train.py", ".git"}, env_for(ws_, prefix_));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("debug.log: excluded by .gitignore:1: *.log"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train.py: included"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(".git: excluded by always: .git"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("largest files:"), std::string::npos) << r.out;
  const auto dry = run_ferry({"pack", "--dry-run"}, env_for(ws_, prefix_));
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("would upload 3 layers"), std::string::npos) << dry.out;
  const auto listed = moto_->aws({"s3", "ls", "--recursive", "s3://packs/" + prefix_});
  EXPECT_EQ(listed.out, "");
}


// `ferry trace stats` with no file reads the last command's trace: the pack's, never a trace view's own,
// not even after a first view has written its trace beside it.
TEST_F(pack_cli, a_trace_view_without_a_file_reads_the_last_commands_trace) {
  const auto report = pack();
  ASSERT_FALSE(report.empty());
  const auto traces = state_ / "state" / "ferry" / "traces";
  std::string pack_file;
  for (const auto& e : fs::directory_iterator(traces))
    if (e.path().filename().string().ends_with("-ferry-pack.jsonl")) pack_file = e.path().string();
  ASSERT_FALSE(pack_file.empty());
  for (int round = 0; round < 2; ++round) {
    const auto r = run_ferry({"trace", "stats", "--json"}, env_for(ws_, prefix_));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "ferry: reading the last command's trace (ferry:pack): " + pack_file)) << r.err;
    const auto v = json::parse(r.out);
    EXPECT_EQ(v.at("files"), 1) << r.out;
    std::set<std::string> types;
    for (const auto& t : v.at("action_types").as_array()) types.insert(std::string(t.at("action_type").as_string()));
    EXPECT_TRUE(types.contains("ferry:pack")) << r.out;
    EXPECT_FALSE(types.contains("ferry:trace:stats")) << r.out;
  }
  // Only trace views: a clear error, not a view of a view.
  for (const auto& e : fs::directory_iterator(traces))
    if (e.path().string() == pack_file) fs::remove(e.path());
  const auto none = run_ferry({"trace", "tree"}, env_for(ws_, prefix_));
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_TRUE(contains(none.err, agent::error_line("no command's trace in " + traces.string()))) << none.err;
}

TEST_F(pack_cli, storage_gc_lists_by_default_removes_with_delete_and_a_later_pack_stores_again) {
  // Its own server, signatures unchecked: moto 5.2.1 rejects correctly signed query values holding '/'
  // (the prefix of ListObjectsV2) while it checks them.
  moto_server moto;
  moto.make_bucket("packs");
  auto options = env_for(ws_, prefix_);
  for (const auto& [k, v] : moto.process_env().env) options.env[k] = v;
  const auto pack_here = [&] {
    const auto r = run_ferry({"pack", "--json"}, options);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out).as_object() : json::object{};
  };
  const auto first = pack_here();
  ASSERT_FALSE(first.empty());
  ASSERT_GT(first.at("uploaded_shards").as_int64(), 0);
  const auto recent = run_ferry({"storage", "gc"}, options);
  ASSERT_EQ(recent.exit_code, 0) << recent.err;
  EXPECT_TRUE(contains(recent.out, "would remove 0 manifests and 0 objects")) << recent.out;
  // With an age of 0s no manifest is live: everything is listed, and nothing goes without --delete.
  const auto listed = run_ferry({"storage", "gc", "--older-than", "0s"}, options);
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_TRUE(contains(listed.out, "would remove 1 manifests")) << listed.out;
  const auto stored = [&] { return moto.aws({"s3", "ls", "--recursive", "s3://packs/" + prefix_}).out; };
  EXPECT_TRUE(contains(stored(), "manifests/")) << stored();
  const auto removed = run_ferry({"storage", "gc", "--older-than", "0s", "--delete"}, options);
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(contains(removed.out, "removed 1 manifests")) << removed.out;
  EXPECT_EQ(stored(), "");
  // The manifest went with its zips, so the next pack does not take them for stored: it stores them again.
  const auto again = pack_here();
  ASSERT_FALSE(again.empty());
  EXPECT_FALSE(again.at("manifest_present").as_bool());
  EXPECT_EQ(again.at("uploaded_shards"), first.at("uploaded_shards"));
  EXPECT_EQ(run_ferry({"storage", "gc", "--older-than", "soon"}, options).exit_code, 2);
}

TEST_F(pack_cli, a_pack_aborts_the_multipart_uploads_an_earlier_one_left_under_its_prefix) {
  // Its own server, signatures unchecked: moto 5.2.1 rejects correctly signed query values holding '/'
  // (the prefix of ListMultipartUploads) while it checks them.
  moto_server moto;
  moto.make_bucket("packs");
  auto begin = [&](const std::string& key) {
    const auto r = moto.aws({"s3api", "create-multipart-upload", "--bucket", "packs", "--key", key});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };
  begin(prefix_ + "layers/left-behind.zip");
  begin(prefix_ + "data/not-a-layer.bin");
  begin("other-prefix/layers/someone-elses.zip");
  const auto uploads = [&] { return multipart_keys(moto); };
  auto options = env_for(ws_, prefix_);
  for (const auto& [k, v] : moto.process_env().env) options.env[k] = v;
  // As people write it: s3://packs/NAME, which names the folder NAME/.
  options.env["FERRY_STORAGE_URL"] = "s3://packs/" + prefix_.substr(0, prefix_.size() - 1);
  // Uploads younger than the age may be another pack's, running now, and stay; 0s sweeps nothing. (moto
  // reports every upload as begun on 2010-11-10, so "young" here takes an age of a century.)
  options.env["FERRY_PACKAGING_STALE_UPLOAD_AGE"] = "36500d";
  const auto young = run_ferry({"pack"}, options);
  ASSERT_EQ(young.exit_code, 0) << young.err;
  EXPECT_TRUE(contains(uploads(), "left-behind.zip")) << uploads();
  ws_.write("fresh.py", "A = 1\n");
  options.env["FERRY_PACKAGING_STALE_UPLOAD_AGE"] = "0s";
  ASSERT_EQ(run_ferry({"pack"}, options).exit_code, 0);
  EXPECT_TRUE(contains(uploads(), "left-behind.zip")) << uploads();
  ws_.write("fresh.py", "A = 2\n");
  options.env["FERRY_PACKAGING_STALE_UPLOAD_AGE"] = "1d";
  const auto r = run_ferry({"pack"}, options);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto left = uploads();
  EXPECT_FALSE(contains(left, "left-behind.zip")) << left;
  EXPECT_TRUE(contains(left, "not-a-layer.bin")) << left;
  EXPECT_TRUE(contains(left, "someone-elses.zip")) << left;
}

TEST_F(pack_cli, storage_gc_lists_stale_multipart_uploads_and_aborts_them_with_delete) {
  // Its own server, signatures unchecked: moto 5.2.1 rejects correctly signed query values holding '/'
  // (the prefix of ListMultipartUploads) while it checks them.
  moto_server moto;
  moto.make_bucket("packs");
  for (const auto& key : {prefix_ + "layers/left-behind.zip", prefix_ + "data/not-a-layer.bin"}) {
    const auto r = moto.aws({"s3api", "create-multipart-upload", "--bucket", "packs", "--key", key});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const auto uploads = [&] { return multipart_keys(moto); };
  auto options = env_for(ws_, prefix_);
  for (const auto& [k, v] : moto.process_env().env) options.env[k] = v;
  // moto reports every upload as begun on 2010-11-10: a century counts it young, a day old.
  const auto young = run_ferry({"storage", "gc", "--older-than", "36500d", "--delete"}, options);
  ASSERT_EQ(young.exit_code, 0) << young.err;
  EXPECT_TRUE(contains(young.out, "aborted 0 multipart uploads")) << young.out;
  EXPECT_TRUE(contains(uploads(), "left-behind.zip")) << uploads();
  const auto listed = run_ferry({"storage", "gc", "--older-than", "1d"}, options);
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_TRUE(contains(listed.out, "would abort s3://packs/" + prefix_ + "layers/left-behind.zip")) << listed.out;
  EXPECT_TRUE(contains(listed.out, "would abort 1 multipart uploads")) << listed.out;
  EXPECT_FALSE(contains(listed.out, "not-a-layer.bin")) << listed.out;
  EXPECT_TRUE(contains(uploads(), "left-behind.zip")) << "listed, not aborted:\n" << uploads();
  const auto removed = run_ferry({"storage", "gc", "--older-than", "1d", "--delete"}, options);
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(contains(removed.out, "aborted 1 multipart uploads")) << removed.out;
  const auto left = uploads();
  EXPECT_FALSE(contains(left, "left-behind.zip")) << left;
  EXPECT_TRUE(contains(left, "not-a-layer.bin")) << "not ferry's to judge:\n" << left;
}

// Runs `ferry pack` until it ends, or kills it after `patience` (the old way against frozen storage was to
// retry for ten minutes without a word).
process_result pack_until_it_ends(process_options options, const fs::path& trace, std::chrono::seconds patience,
                                  bool& ended) {
  auto child = spawn_ferry({"pack", "--trace", trace.string()}, options);
  ended = false;
  for (auto waited = std::chrono::milliseconds(0); waited < patience && !ended; waited += std::chrono::milliseconds(100)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ended = dead_or_zombie(child->pid());
  }
  if (!ended) child->signal(SIGKILL);
  return child->wait();
}

TEST_F(pack_cli, storage_that_accepts_and_never_answers_is_named_then_ends_the_pack_with_one_error) {
  // The kernel completes each connection to this socket, and nothing ever reads from it or answers.
  const auto silent = listen_on_loopback("silent storage");
  const auto endpoint = fmt::format("http://127.0.0.1:{}", silent.port);
  auto options = env_for(ws_, prefix_);
  options.env["AWS_ENDPOINT_URL"] = endpoint;
  // The defaults wait 60 s per read and try 5 times; the stall bound must end it long before.
  options.env["FERRY_NET_STALL_WARNING"] = "1s";
  options.env["FERRY_NET_STALL_LIMIT"] = "3s";
  const auto trace = scratch_ / "silent.jsonl";
  bool ended = false;
  const auto r = pack_until_it_ends(options, trace, std::chrono::seconds(90), ended);
  ::close(silent.fd);
  ASSERT_TRUE(ended) << "ferry pack still ran 90 s after storage stopped answering:\n" << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // The warning names the storage, the operation and the object while the stall lasts.
  const auto warning = "ferry: warning: storage at " + endpoint + " has made no progress for ";
  ASSERT_TRUE(contains(r.err, warning)) << r.err;
  EXPECT_TRUE(contains(r.err, "GetObject s3://packs/" + prefix_)) << r.err;
  // Then one error names the same.
  const auto error = agent::error_line("storage at " + endpoint + " made no progress for ");
  ASSERT_TRUE(contains(r.err, error)) << r.err;
  const auto error_line = r.err.substr(r.err.find(error));
  EXPECT_TRUE(contains(error_line, "(net.stall_limit is 3s): GetObject s3://packs/" + prefix_)) << error_line;
  EXPECT_EQ(error_line.find("ferry: error:", 1), std::string::npos) << "one error:\n" << r.err;
  EXPECT_EQ(r.err.find("X-Amz-"), std::string::npos) << r.err;
  const auto tasks = eliot_parse({trace});
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].at("complete").as_bool());
  const auto text = read_file(trace);
  EXPECT_TRUE(contains(text, "\"message_type\":\"s3:stall_warning\"")) << text;
  EXPECT_TRUE(contains(text, "\"message_type\":\"s3:stalled\"")) << text;
}

TEST_F(pack_cli, a_slow_upload_that_moves_bytes_is_not_a_stall) {
  // 4 MiB that do not compress, through a link of 512 KiB/s: eight seconds of upload, and no answer from
  // storage until its end, under a stall limit of one second.
  temp_dir ws;
  ws.write("train.py", "print('train')\n");
  write_random_file(ws / "weights.bin", 4u << 20, 3);
  fault_proxy proxy{"127.0.0.1", moto_->port()};
  proxy.set_rate(512u << 10);
  auto options = env_for(ws, prefix_);
  options.env["AWS_ENDPOINT_URL"] = proxy.endpoint();
  options.env["FERRY_PACKAGING_SHIP_SITE_PACKAGES"] = "false";
  options.env["FERRY_NET_STALL_WARNING"] = "1s";
  options.env["FERRY_NET_STALL_LIMIT"] = "1s";
  const auto r = run_ferry({"pack"}, options);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(contains(r.err, "made no progress")) << r.err;
  EXPECT_GE(proxy.bytes_uploaded(), 4u << 20);
}

// What a pack of two shards of one layer, each a multipart upload, did when storage stopped answering once
// both were under way (`settings` on top of the usual environment), waited for up to `limit`.
struct frozen_pack {
  process_result result;
  bool ended = false;     // before the limit
  std::string endpoint;   // of the storage that froze
};

frozen_pack pack_into_storage_that_freezes(const std::map<std::string, std::string>& settings, unsigned seed,
                                           std::chrono::seconds limit, const fs::path& trace,
                                           const std::function<process_options(const temp_dir&)>& env_for_ws) {
  temp_dir ws;
  write_random_file(ws / "a.bin", 24u << 20, seed);
  write_random_file(ws / "b.bin", 24u << 20, seed + 1);
  moto_server frozen;
  frozen.make_bucket("packs");
  auto options = env_for_ws(ws);
  for (const auto& [k, v] : frozen.process_env().env) options.env[k] = v;
  options.env["FERRY_PACKAGING_SHIP_SITE_PACKAGES"] = "false";
  options.env["FERRY_PACKAGING_SHARD_SIZE"] = "20MiB";
  for (const auto& [k, v] : settings) options.env[k] = v;
  auto child = spawn_ferry({"pack", "--trace", trace.string()}, options);
  auto uploads = [&] {
    const auto log = frozen.log();
    std::size_t n = 0;
    for (auto at = log.find("?uploads="); at != std::string::npos; at = log.find("?uploads=", at + 1)) ++n;
    return n;
  };
  for (int i = 0; i < 600 && uploads() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(uploads(), 2u) << frozen.log();
  frozen.freeze();
  frozen_pack out;
  out.endpoint = options.env["AWS_ENDPOINT_URL"];
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!out.ended && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    out.ended = dead_or_zombie(child->pid());
  }
  frozen.thaw();
  if (!out.ended) child->signal(SIGKILL);
  out.result = child->wait();
  return out;
}

TEST_F(pack_cli, storage_that_freezes_mid_upload_with_the_default_timeouts_ends_the_pack_at_the_stall_limit) {
  // Reads and writes wait 60 s and each request is tried 5 times, as by default: only the stall bound and
  // the abort's own budget can end it soon.
  const auto trace = scratch_ / "frozen.jsonl";
  const auto got = pack_into_storage_that_freezes(
      {{"FERRY_NET_STALL_WARNING", "1s"}, {"FERRY_NET_STALL_LIMIT", "3s"}, {"FERRY_NET_ABORT_TIMEOUT", "1s"}}, 7,
      std::chrono::seconds(90), trace, [&](const temp_dir& ws) { return env_for(ws, prefix_); });
  const auto& r = got.result;
  ASSERT_TRUE(got.ended) << "ferry pack still ran 90 s after storage froze:\n" << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "ferry: warning: storage at " + got.endpoint + " has made no progress for ")) << r.err;
  const auto error = agent::error_line("storage at " + got.endpoint + " made no progress for ");
  ASSERT_TRUE(contains(r.err, error)) << r.err;
  const auto error_line = r.err.substr(r.err.find(error));
  EXPECT_TRUE(contains(error_line, "s3://packs/" + prefix_ + "layers/")) << error_line;
  // Never an upload id or a signature.
  EXPECT_EQ(r.err.find("uploadId"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("X-Amz-"), std::string::npos) << r.err;
  const auto tasks = eliot_parse({trace});
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].at("complete").as_bool());
  // The aborts were tried, each once, within their own budget.
  EXPECT_TRUE(contains(read_file(trace), "AbortMultipartUpload")) << "no abort in the trace";
}

TEST_F(pack_cli, storage_that_freezes_mid_upload_ends_the_pack_with_an_error_not_a_hang) {
  // Every request has a 3 s deadline and one attempt: a minute is ample; a hang never ends.
  const auto trace = scratch_ / "frozen.jsonl";
  const auto got = pack_into_storage_that_freezes(
      {{"FERRY_NET_READ_TIMEOUT", "3s"}, {"FERRY_NET_WRITE_TIMEOUT", "3s"}, {"FERRY_NET_RETRY_MAX_ATTEMPTS", "1"}},
      5, std::chrono::seconds(60), trace, [&](const temp_dir& ws) { return env_for(ws, prefix_); });
  const auto& r = got.result;
  ASSERT_TRUE(got.ended) << "ferry pack still ran a minute after storage froze";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("timeout"), std::string::npos) << r.err;
  const auto tasks = eliot_parse({trace});
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].at("complete").as_bool());
}

TEST_F(pack_cli, ctrl_c_while_shipping_aborts_the_uploads_stores_no_manifest_and_closes_the_trace) {
  // 48 MiB that do not compress, sent through a proxy that slows every chunk: the upload is under way
  // (several parts of one multipart upload) when the interrupt comes.
  temp_dir ws;
  ws.write("train.py", "print('train')\n");
  write_random_file(ws / "weights.bin", 48u << 20, 11);
  fault_proxy proxy{"127.0.0.1", moto_->port()};
  proxy.set_delay(std::chrono::milliseconds(5));
  auto options = env_for(ws, prefix_);
  options.env["AWS_ENDPOINT_URL"] = proxy.endpoint();
  options.env["FERRY_PACKAGING_SHIP_SITE_PACKAGES"] = "false";
  const auto trace = scratch_ / "pack.jsonl";
  auto child = spawn_ferry({"pack", "--trace", trace.string()}, options);
  for (int i = 0; i < 600 && proxy.bytes_uploaded() < (12u << 20); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(proxy.bytes_uploaded(), 12u << 20) << "the upload never got going";
  child->signal(SIGINT);
  const auto r = child->wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;

  const auto uploads = moto_->aws({"s3api", "list-multipart-uploads", "--bucket", "packs"});
  EXPECT_EQ(uploads.exit_code, 0) << uploads.err;
  EXPECT_EQ(uploads.out.find("UploadId"), std::string::npos) << uploads.out;
  const auto listed = moto_->aws({"s3", "ls", "--recursive", "s3://packs/" + prefix_});
  EXPECT_EQ(listed.out.find("manifests/"), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find(".zip"), std::string::npos) << "no layer zip of weights.bin may be stored:\n" << listed.out;

  const auto tasks = eliot_parse({trace});
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].at("complete").as_bool());
  EXPECT_NE(read_file(trace).find("\"reason\":\"cancelled\""), std::string::npos);
}

}  // namespace
}  // namespace ferry::test
