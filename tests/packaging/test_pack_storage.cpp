// pack() against a real moto_server, in process: every shard's zip gets the SHA-256 of its stored bytes
// into the manifest, whether it was uploaded now or found in storage (through the local digest cache or
// the zip's sidecar), and a warm pack gets the stored manifest back with one GET. What is in storage is
// read back with the aws CLI and sha256sum, never with ferry's own client.
#include "packaging/layer_upload.hpp"
#include "packaging/pack.hpp"
#include "packaging/stored_manifest.hpp"
#include "packaging/storage_gc.hpp"

#include "net/digest.hpp"
#include "net/s3_session.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/settings.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_root.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace ferry::packaging {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using test::temp_dir;

std::string random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string bytes(size, '\0');
  for (auto& b : bytes) b = static_cast<char>(rng());
  return bytes;
}

class pack_storage : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    moto_ = new test::moto_server();
    moto_->make_bucket("packs");
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }

  void SetUp() override {
    prefix_ = std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "/";
    ws_.write("train.py", "print('train')\n");
    ws_.write("a.bin", random_bytes(40 << 10, 1));
    ws_.write("b.bin", random_bytes(40 << 10, 2));
    ws_.write("pkg/model.py", "W = [1, 2, 3]\n");
    // Over the 5 MiB part size: a multipart upload of two parts, hashed part by part.
    ws_.write("weights.bin", random_bytes(6 << 20, 3));
    auto settings = test::default_settings(home_.path());
    settings.s3.part_size.bytes = 5 << 20;
    std::map<std::string, std::string, std::less<>> vars;
    for (const auto& [name, value] : moto_->environment()) vars[name] = value;
    diagnostics diag;
    auto opened = net::open_s3_session(io_.get_executor(), cpu_, settings, net::map_environment(vars), diag);
    if (!opened) throw std::runtime_error(diag.message);
    session_ = std::move(*opened);
  }

  template <class T>
  T run(asio::awaitable<T> work) {
    auto done = asio::co_spawn(io_, std::move(work), asio::use_future);
    io_.run();
    io_.restart();
    return done.get();
  }

  pack_report pack(zip_digest_cache& digests, bool dry_run = false, pack_progress* progress = nullptr,
                   std::chrono::seconds manifest_refresh = std::chrono::hours(24), std::size_t upload_concurrency = 4) {
    pack_settings p;
    p.manifest_refresh = manifest_refresh;
    p.upload_concurrency = upload_concurrency;
    p.scan.threads = 2;
    p.scan.shard_size = 64 << 10;  // a.bin and b.bin in shards of their own
    p.bucket = "packs";
    p.prefix = prefix_;
    p.dry_run = dry_run;
    hash_cache cache;
    diagnostics diag;
    auto r = run(packaging::pack(trace_.root(), cpu_, session_->s3.get(), roots_, python_, p, cache, digests, progress,
                                 diag));
    if (!r) throw std::runtime_error(diag.message);
    return std::move(*r);
  }

  // The object as the aws CLI reads it, into a file; nullopt when it is not there.
  std::optional<fs::path> fetch(const std::string& key) {
    const auto to = scratch_ / std::to_string(fetched_++);
    const auto r = moto_->aws({"s3", "cp", "s3://packs/" + key, to.string()});
    if (r.exit_code != 0) return std::nullopt;
    return to;
  }
  static std::string sha256sum(const fs::path& file) {
    const auto r = test::run({"sha256sum", file.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, 64);
  }
  void remove(const std::string& key) {
    const auto r = moto_->aws({"s3", "rm", "s3://packs/" + key});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  stored_manifest parsed(const std::string& text) {
    diagnostics diag;
    auto m = parse_manifest(text, diag);
    if (!m) throw std::runtime_error(diag.message);
    return std::move(*m);
  }

  static test::moto_server* moto_;
  temp_dir ws_, home_, scratch_, trace_dir_;
  std::string prefix_;
  std::vector<root_spec> roots_{{ws_.path(), root_spec::kind::workspace, 0}};
  const python_info python_{"3.11.2", "cp311-linux_x86_64", "/usr/bin/python3"};
  asio::io_context io_;
  net::cpu_pool cpu_{2};
  std::optional<net::s3_session> session_;
  test::trace_root trace_{trace_dir_ / "trace.jsonl", "test:pack_storage"};
  int fetched_ = 0;
};

test::moto_server* pack_storage::moto_ = nullptr;

TEST_F(pack_storage, every_shard_in_the_manifest_carries_the_sha256_of_its_stored_zip) {
  zip_digest_cache digests;
  const auto report = pack(digests);
  const auto manifest = parsed(report.manifest_text);
  ASSERT_EQ(manifest.layers.size(), 1u);
  const auto& shards = manifest.layers[0].shards;
  ASSERT_GE(shards.size(), 3u);
  EXPECT_EQ(report.uploaded_shards, shards.size());
  bool multipart = false;
  for (const auto& s : shards) {
    const auto zip = fetch(s.key);
    ASSERT_TRUE(zip) << s.key;
    EXPECT_EQ(sha256sum(*zip), s.sha256) << s.key;
    EXPECT_EQ(fs::file_size(*zip), s.zip_bytes) << s.key;
    multipart = multipart || s.zip_bytes > (5u << 20);
    const auto sidecar = fetch(s.key + ".sha256");
    ASSERT_TRUE(sidecar) << s.key;
    EXPECT_EQ(test::read_file(*sidecar), s.sha256 + " " + std::to_string(s.zip_bytes) + "\n");
  }
  EXPECT_TRUE(multipart) << "one zip must have gone up in parts";
  const auto stored = fetch(report.manifest_key);
  ASSERT_TRUE(stored);
  EXPECT_EQ(test::read_file(*stored), report.manifest_text);
  const auto content = manifest_content_json(python_, roots_, report.scan.layers, prefix_, zip_options{}.codec);
  EXPECT_EQ(report.manifest_key, manifest_key(prefix_, content)) << "the key names the content text";
}

// Each layer is told of once, as soon as its first shard is in storage, and each later shard of it once, as
// soon as it is stored, so that together they say what the manifest then says: on a cold pack as the
// uploads end (a layer of several shards first with one of them, the rest to come), on a warm one every
// layer whole at once, in a dry run never. Two roots with the same files share their shards; an empty root
// is a layer too.
TEST_F(pack_storage, each_layer_is_told_of_at_its_first_stored_shard_and_each_later_shard_as_it_is_stored) {
  temp_dir twin_a, twin_b, empty;
  for (auto* t : {&twin_a, &twin_b}) {
    t->write("lib.py", "L = 1\n");
    t->write("data.bin", random_bytes(100 << 10, 9));
  }
  roots_.push_back({twin_a.path(), root_spec::kind::other, 1});
  roots_.push_back({twin_b.path(), root_spec::kind::other, 2});
  roots_.push_back({empty.path(), root_spec::kind::other, 3});
  for (const bool warm : {false, true}) {
    std::map<std::size_t, int> told;
    std::map<std::size_t, shipped_layer> shipped;
    std::map<std::pair<std::size_t, std::size_t>, int> shards_told;
    std::size_t multi_shard = 0;
    pack_progress progress;
    progress.on_layer_shipped = [&](const shipped_layer& l) {
      ++told[l.index];
      shipped[l.index] = l;
      std::size_t stored = 0;
      for (std::size_t i = 0; i < l.shards.size(); ++i) {
        if (!l.shards[i].stored()) continue;
        ++stored;
        ++shards_told[{l.index, i}];
      }
      if (l.shards.size() > 1) {
        ++multi_shard;
        // Cold, a layer goes at its first stored shard, the others still on their way; warm, whole.
        EXPECT_EQ(stored, warm ? l.shards.size() : 1u) << l.packed->name;
      }
    };
    progress.on_shard_shipped = [&](std::size_t layer, std::size_t shard, const shipped_shard& s) {
      ASSERT_TRUE(shipped.contains(layer)) << "a shard before its layer";
      ASSERT_LT(shard, shipped[layer].shards.size());
      EXPECT_FALSE(shipped[layer].shards[shard].stored()) << "told of twice";
      EXPECT_TRUE(s.stored());
      shipped[layer].shards[shard] = s;
      ++shards_told[{layer, shard}];
    };
    zip_digest_cache digests;
    const auto report = pack(digests, false, &progress);
    EXPECT_EQ(report.manifest_present, warm);
    EXPECT_GE(multi_shard, 2u) << "the workspace and each twin have several shards";
    const auto manifest = parsed(report.manifest_text);
    ASSERT_EQ(told.size(), manifest.layers.size()) << (warm ? "warm" : "cold");
    for (const auto& [index, times] : told) EXPECT_EQ(times, 1) << "layer " << index;
    for (const auto& [where, times] : shards_told) EXPECT_EQ(times, 1) << "shard " << where.second;
    for (const auto& [index, l] : shipped) {
      const auto& stored = manifest.layers.at(l.index);
      EXPECT_EQ(l.packed->name, stored.name);
      ASSERT_EQ(l.shards.size(), stored.shards.size()) << stored.name;
      for (std::size_t i = 0; i < l.shards.size(); ++i) {
        EXPECT_EQ(l.shards[i].key, stored.shards[i].key);
        EXPECT_EQ(l.shards[i].sha256, stored.shards[i].sha256);
        EXPECT_EQ(l.shards[i].zip_bytes, stored.shards[i].zip_bytes);
        EXPECT_EQ(l.shards[i].files, stored.shards[i].files);
        EXPECT_EQ(l.shards[i].bytes, stored.shards[i].bytes);
      }
    }
  }
  std::size_t in_dry_run = 0;
  pack_progress dry;
  dry.on_layer_shipped = [&](const shipped_layer&) { ++in_dry_run; };
  zip_digest_cache digests;
  pack(digests, true, &dry);
  EXPECT_EQ(in_dry_run, 0u);
}

// A layer's shards go to storage in their order, not the largest first: a node starts on the first while
// the next is zipped. One upload at a time makes the order the pack's choice alone.
TEST_F(pack_storage, a_layers_shards_are_stored_in_shard_order) {
  std::vector<std::size_t> order;
  std::size_t shards = 0;
  pack_progress progress;
  progress.on_layer_shipped = [&](const shipped_layer& l) {
    shards = l.shards.size();
    for (std::size_t i = 0; i < l.shards.size(); ++i)
      if (l.shards[i].stored()) order.push_back(i);
  };
  progress.on_shard_shipped = [&](std::size_t, std::size_t shard, const shipped_shard&) { order.push_back(shard); };
  zip_digest_cache digests;
  pack(digests, false, &progress, std::chrono::hours(24), 1);
  ASSERT_GE(shards, 3u) << "the workspace is cut into several shards";
  std::vector<std::size_t> in_order(shards);
  for (std::size_t i = 0; i < shards; ++i) in_order[i] = i;
  EXPECT_EQ(order, in_order);
}

TEST_F(pack_storage, a_warm_pack_gets_the_stored_manifest_back_and_uploads_nothing) {
  zip_digest_cache digests;
  const auto cold = pack(digests);
  EXPECT_FALSE(cold.manifest_present);
  zip_digest_cache empty;  // the warm path needs no digests of its own
  const auto warm = pack(empty);
  EXPECT_TRUE(warm.manifest_present);
  EXPECT_EQ(warm.uploaded_shards, 0u);
  EXPECT_EQ(warm.manifest_text, cold.manifest_text);
  EXPECT_EQ(warm.digests, cold.digests);
  EXPECT_EQ(warm.digests.size(), cold.scan.layers[0].shards.size());
}

// `storage gc` keeps what manifests newer than its age name: a project packed every day without a change
// must keep a young manifest, so a warm pack stores the same manifest again once it is old.
TEST_F(pack_storage, a_warm_pack_stores_its_manifest_again_once_it_is_older_than_manifest_refresh) {
  zip_digest_cache digests;
  const auto cold = pack(digests);
  auto last_modified = [&] {
    const auto r = moto_->aws({"s3api", "head-object", "--bucket", "packs", "--key", cold.manifest_key, "--query",
                               "LastModified", "--output", "text"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const auto first = last_modified();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // Last-Modified counts whole seconds
  const auto young = pack(digests);
  EXPECT_TRUE(young.manifest_present);
  EXPECT_EQ(last_modified(), first) << "a manifest younger than a day is left as it is";

  const auto old = pack(digests, false, nullptr, std::chrono::seconds(0));
  EXPECT_TRUE(old.manifest_present);
  EXPECT_EQ(old.uploaded_shards, 0u);
  EXPECT_NE(last_modified(), first) << "a manifest at least manifest_refresh old is stored again";
  const auto stored = fetch(cold.manifest_key);
  ASSERT_TRUE(stored);
  EXPECT_EQ(test::read_file(*stored), cold.manifest_text);
}

TEST_F(pack_storage, without_the_local_cache_the_digests_come_from_the_sidecars) {
  zip_digest_cache digests;
  const auto cold = pack(digests);
  remove(cold.manifest_key);
  zip_digest_cache empty;
  const auto again = pack(empty);
  EXPECT_FALSE(again.manifest_present);
  EXPECT_EQ(again.uploaded_shards, 0u);
  EXPECT_EQ(again.manifest_text, cold.manifest_text);
  EXPECT_EQ(empty.size(), cold.scan.layers[0].shards.size()) << "what the sidecars said is now cached";
}

TEST_F(pack_storage, with_the_local_cache_no_sidecar_is_read) {
  zip_digest_cache digests;
  const auto cold = pack(digests);
  remove(cold.manifest_key);
  const auto manifest = parsed(cold.manifest_text);
  for (const auto& s : manifest.layers[0].shards) remove(s.key + ".sha256");
  const auto again = pack(digests);
  EXPECT_EQ(again.uploaded_shards, 0u) << "the cache knew every zip storage holds";
  EXPECT_EQ(again.manifest_text, cold.manifest_text);
}

TEST_F(pack_storage, a_zip_without_its_sidecar_is_uploaded_again_with_one) {
  zip_digest_cache digests;
  const auto cold = pack(digests);
  const auto shard = parsed(cold.manifest_text).layers[0].shards.at(1);
  remove(cold.manifest_key);
  remove(shard.key + ".sha256");
  zip_digest_cache empty;
  const auto again = pack(empty);
  EXPECT_EQ(again.uploaded_shards, 1u);
  EXPECT_EQ(again.uploaded_bytes, shard.zip_bytes);
  EXPECT_EQ(again.manifest_text, cold.manifest_text);
  EXPECT_TRUE(fetch(shard.key + ".sha256")) << "the sidecar is back";
}

TEST_F(pack_storage, a_deleted_zip_is_uploaded_again_although_the_cache_knows_its_digest) {
  zip_digest_cache digests;
  const auto cold = pack(digests);
  const auto shard = parsed(cold.manifest_text).layers[0].shards.at(0);
  remove(cold.manifest_key);
  remove(shard.key);
  const auto again = pack(digests);
  EXPECT_EQ(again.uploaded_shards, 1u);
  EXPECT_EQ(again.manifest_text, cold.manifest_text);
  const auto zip = fetch(shard.key);
  ASSERT_TRUE(zip);
  EXPECT_EQ(sha256sum(*zip), shard.sha256);
}

TEST_F(pack_storage, a_stored_manifest_without_digests_counts_as_absent_and_is_rewritten) {
  zip_digest_cache digests;
  const auto cold = pack(digests);
  // What an older ferry stored under the same key: the content text alone.
  const auto old = scratch_ / "old.json";
  std::ofstream(old) << manifest_content_json(python_, roots_, cold.scan.layers, prefix_, zip_options{}.codec);
  ASSERT_EQ(moto_->aws({"s3", "cp", old.string(), "s3://packs/" + cold.manifest_key}).exit_code, 0);
  const auto again = pack(digests);
  EXPECT_FALSE(again.manifest_present);
  EXPECT_EQ(again.uploaded_shards, 0u);
  EXPECT_EQ(again.manifest_text, cold.manifest_text);
  const auto stored = fetch(cold.manifest_key);
  ASSERT_TRUE(stored);
  EXPECT_EQ(test::read_file(*stored), cold.manifest_text);
}

// storage gc's plan, on the caller's clock: an old manifest no longer keeps its zips; a zip a live manifest
// names stays however old; a young zip that no manifest names yet (a pack under way) stays; what remains
// still packs, and the old content packs again.
TEST_F(pack_storage, gc_removes_what_only_old_manifests_name_and_nothing_a_live_one_or_a_running_pack_needs) {
  using namespace std::chrono_literals;
  zip_digest_cache digests;
  const auto first = pack(digests);
  // An argument the Python API stored before the age, and one after it.
  scratch_.write("blob", "a pickled argument");
  const auto old_blob = prefix_ + "blobs/" + std::string(64, 'a');
  const auto young_blob = prefix_ + "blobs/" + std::string(64, 'b');
  ASSERT_EQ(moto_->aws({"s3", "cp", (scratch_ / "blob").string(), "s3://packs/" + old_blob}).exit_code, 0);
  // Storage dates objects to the second: the second manifest comes well over 2 s after the first.
  std::this_thread::sleep_for(2500ms);
  ws_.write("a.bin", random_bytes(40 << 10, 11));  // a.bin's shard changes; the others stay
  const auto second = pack(digests);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  const auto under_way = prefix_ + "layers/" + std::string(64, 'f') + ".zip";
  scratch_.write("young.zip", "not yet in a manifest");
  const auto young = scratch_ / "young.zip";
  ASSERT_EQ(moto_->aws({"s3", "cp", young.string(), "s3://packs/" + under_way}).exit_code, 0);
  ASSERT_EQ(moto_->aws({"s3", "cp", (scratch_ / "blob").string(), "s3://packs/" + young_blob}).exit_code, 0);

  std::set<std::string> first_keys, second_keys;
  for (const auto& l : parsed(first.manifest_text).layers)
    for (const auto& sh : l.shards) first_keys.insert(sh.key);
  for (const auto& l : parsed(second.manifest_text).layers)
    for (const auto& sh : l.shards) second_keys.insert(sh.key);
  std::set<std::string> expected;
  for (const auto& k : first_keys) {
    if (second_keys.contains(k)) continue;
    expected.insert(k);
    expected.insert(k + ".sha256");
  }
  ASSERT_FALSE(expected.empty()) << "a.bin's new bytes must make a new shard";
  expected.insert(old_blob);

  diagnostics diag;
  auto plan = run(plan_gc(trace_.root(), *session_->s3, "packs", prefix_, 2s, now, diag));
  ASSERT_TRUE(plan) << diag.message;
  EXPECT_EQ(plan->live_manifests, 1u);
  ASSERT_EQ(plan->manifests.size(), 1u);
  EXPECT_EQ(plan->manifests[0].key, first.manifest_key);
  std::set<std::string> doomed;
  for (const auto& z : plan->zips) doomed.insert(z.key);
  EXPECT_EQ(doomed, expected);
  ASSERT_TRUE(run(apply_gc(trace_.root(), *session_->s3, "packs", *plan, diag))) << diag.message;

  EXPECT_FALSE(fetch(first.manifest_key));
  for (const auto& k : expected) EXPECT_FALSE(fetch(k)) << k;
  EXPECT_TRUE(fetch(second.manifest_key));
  for (const auto& k : second_keys) EXPECT_TRUE(fetch(k)) << k;
  EXPECT_TRUE(fetch(under_way));
  EXPECT_TRUE(fetch(young_blob));

  // The first content again: its manifest is gone, so its missing zip is stored again, and every zip its
  // new manifest names is there.
  ws_.write("a.bin", random_bytes(40 << 10, 1));
  zip_digest_cache fresh;
  const auto again = pack(fresh);
  EXPECT_EQ(again.manifest_key, first.manifest_key);
  EXPECT_FALSE(again.manifest_present);
  EXPECT_GE(again.uploaded_shards, 1u);
  for (const auto& l : parsed(again.manifest_text).layers)
    for (const auto& sh : l.shards) EXPECT_TRUE(fetch(sh.key)) << sh.key;
}

TEST_F(pack_storage, a_dry_run_stores_nothing_and_gives_the_content_text) {
  zip_digest_cache digests;
  const auto dry = pack(digests, true);
  EXPECT_FALSE(dry.manifest_present);
  EXPECT_EQ(dry.manifest_text, manifest_content_json(python_, roots_, dry.scan.layers, prefix_, zip_options{}.codec));
  EXPECT_TRUE(dry.digests.empty());
  EXPECT_FALSE(fetch(dry.manifest_key));
}

TEST_F(pack_storage, zip_shard_hashes_every_part_in_order) {
  zip_digest_cache digests;
  const auto report = pack(digests, true);  // for the scan
  const auto& l = report.scan.layers.at(0);
  for (const auto& s : l.shards) {
    std::string bytes;
    int parts = 0;
    std::function<void(std::vector<char>&&)> out = [&](std::vector<char>&& part) {
      bytes.append(part.data(), part.size());
      ++parts;
    };
    diagnostics diag;
    auto r = run(zip_shard(cpu_, l, s, {}, 16 << 10, out, diag));
    ASSERT_TRUE(r) << diag.message;
    EXPECT_EQ(r->sha256, net::sha256(bytes));
    EXPECT_EQ(r->zip_bytes, bytes.size());
    if (s.bytes > (1 << 20)) {
      EXPECT_GT(parts, 1);
    }
  }
}

}  // namespace
}  // namespace ferry::packaging
