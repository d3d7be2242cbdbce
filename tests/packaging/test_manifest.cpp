// The manifest's two texts, the stored body read back by parse_manifest, the zip sidecar's format and the
// local zip digest cache: everything about shard digests that needs no storage.
#include "packaging/error.hpp"
#include "packaging/manifest.hpp"
#include "packaging/stored_manifest.hpp"
#include "packaging/zip_digest.hpp"
#include "packaging/zip_digest_cache.hpp"

#include "net/digest.hpp"
#include "support/temp_dir.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ferry::packaging {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using test::temp_dir;

// A sealed layer of in-memory files: the manifest reads only paths, sizes and digests.
layer make_layer(std::string name, std::size_t root, const std::vector<std::pair<std::string, std::string>>& files,
                 std::uint64_t shard_size) {
  layer l;
  l.name = std::move(name);
  l.root_index = root;
  for (const auto& [path, content] : files) {
    file_entry e;
    e.path = path;
    e.key.size = content.size();
    e.digest = net::sha256(content);
    l.files.push_back(std::move(e));
  }
  seal_layer(l, shard_size);
  return l;
}

// The digest a shard's zip might have: anything, as long as each shard's differs.
zip_digest digest_for(const shard& s) {
  return {net::sha256("zip of " + net::to_hex(s.id)), 1000 + s.bytes};
}

struct sample {
  python_info python{"3.11.2", "cp311-linux_x86_64", "/usr/bin/python3"};
  std::vector<root_spec> roots{{"/home/me/project", root_spec::kind::workspace, 0},
                               {"/venv/lib/python3.11/site-packages", root_spec::kind::site_packages, 1}};
  std::vector<layer> layers;
  shard_digests digests;

  sample() {
    layers.push_back(make_layer("workspace", 0, {{"train.py", "print(1)\n"}, {"pkg/m.py", "M = 2\n"}}, 1 << 20));
    // Two shards: each file is over half the shard size.
    layers.push_back(make_layer("alpha", 1, {{"alpha/a.py", std::string(600, 'a')}, {"alpha/b.py", std::string(700, 'b')}},
                                1000));
    for (const auto& l : layers) {
      for (const auto& s : l.shards) digests[s.id] = digest_for(s);
    }
  }
  std::string content() const { return manifest_content_json(python, roots, layers, "pre/fix", zip_codec::zstd); }
  std::string body() const { return manifest_json(python, roots, layers, "pre/fix", zip_codec::zstd, digests); }
};

TEST(manifest, the_body_is_the_content_text_with_each_shards_digest_and_the_key_names_the_content) {
  const sample s;
  ASSERT_EQ(s.layers[1].shards.size(), 2u);
  const auto content = s.content();
  const auto body = s.body();
  EXPECT_EQ(content.find("sha256"), std::string::npos) << content;
  EXPECT_EQ(body, s.body()) << "the body must be deterministic";
  EXPECT_EQ(manifest_key("pre/fix", content), "pre/fix/manifests/" + net::hex_sha256(content) + ".json");

  auto doc = json::parse(body).as_object();
  for (auto& l : doc.at("layers").as_array()) {
    for (auto& shard : l.at("shards").as_array()) {
      std::vector<std::string> keys;
      for (const auto& field : shard.as_object()) keys.push_back(std::string(field.key()));
      EXPECT_EQ(keys, (std::vector<std::string>{"id", "key", "files", "bytes", "sha256", "zip_bytes"}));
      shard.as_object().erase("sha256");
      shard.as_object().erase("zip_bytes");
    }
  }
  EXPECT_EQ(json::serialize(doc), content) << "without the digests the body must be the content text";
}

TEST(manifest, parse_manifest_reads_back_every_field_in_stored_order) {
  const sample s;
  diagnostics diag;
  auto parsed = parse_manifest(s.body(), diag);
  ASSERT_TRUE(parsed) << diag.message;
  EXPECT_EQ(parsed->python_version, "3.11.2");
  EXPECT_EQ(parsed->python_platform, "cp311-linux_x86_64");
  ASSERT_EQ(parsed->roots.size(), 2u);
  EXPECT_EQ(parsed->roots[1].index, 1u);
  EXPECT_EQ(parsed->roots[1].kind, "site-packages");
  EXPECT_EQ(parsed->roots[1].path, "/venv/lib/python3.11/site-packages");
  EXPECT_EQ(parsed->roots[0].kind, "workspace");
  ASSERT_EQ(parsed->layers.size(), s.layers.size());
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    const auto& want = s.layers[i];
    const auto& got = parsed->layers[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.root, want.root_index);
    EXPECT_EQ(got.id, net::to_hex(want.id));
    EXPECT_EQ(got.files, want.files.size());
    EXPECT_EQ(got.bytes, want.bytes);
    ASSERT_EQ(got.shards.size(), want.shards.size());
    for (std::size_t j = 0; j < want.shards.size(); ++j) {
      const auto& ws = want.shards[j];
      const auto& gs = got.shards[j];
      EXPECT_EQ(gs.id, net::to_hex(ws.id));
      EXPECT_EQ(gs.key, shard_key("pre/fix", ws, zip_codec::zstd));
      EXPECT_EQ(gs.files, ws.count);
      EXPECT_EQ(gs.bytes, ws.bytes);
      EXPECT_EQ(gs.sha256, net::to_hex(digest_for(ws).sha256));
      EXPECT_EQ(gs.zip_bytes, digest_for(ws).zip_bytes);
    }
  }
}

TEST(manifest, parse_manifest_refuses_a_text_without_digests_and_says_why) {
  const sample s;
  diagnostics diag;
  auto parsed = parse_manifest(s.content(), diag);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), errc::bad_manifest);
  EXPECT_NE(diag.message.find("layers[0].shards[0]"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("\"sha256\""), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("older ferry"), std::string::npos) << diag.message;
}

TEST(manifest, parse_manifest_names_the_field_at_fault) {
  const sample s;
  using edit = std::function<void(json::object&)>;
  auto shard = [](json::object& doc, std::size_t layer, std::size_t index) -> json::object& {
    return doc.at("layers").as_array().at(layer).at("shards").as_array().at(index).as_object();
  };
  const std::vector<std::pair<edit, std::string>> cases{
      {[](json::object& d) { d["format"] = "ferry-manifest-v9"; }, "format is \"ferry-manifest-v9\", not ferry-manifest-v1"},
      {[](json::object& d) { d.erase("python"); }, "manifest: python is missing"},
      {[](json::object& d) { d["python"].as_object()["version"] = 3; }, "python.version is not a string"},
      {[](json::object& d) { d["roots"] = 1; }, "manifest: roots is not an array"},
      {[](json::object& d) { d["roots"].as_array()[1].as_object()["kind"] = "egg"; }, "roots[1].kind is \"egg\""},
      {[](json::object& d) { d["layers"].as_array()[0].as_object()["root"] = 7; },
       "layers[0].root is 7, but no root has that index"},
      {[](json::object& d) { d["layers"].as_array()[1].as_object()["shards"] = json::array(); },
       "layers[1].shards is empty"},
      {[](json::object& d) { d["layers"].as_array()[1].as_object()["shards"].as_array()[0] = 5; },
       "layers[1].shards[0] is not an object"},
      {[&](json::object& d) { shard(d, 1, 1)["sha256"] = "xyz"; }, "layers[1].shards[1].sha256 is not 64 lowercase hex"},
      {[&](json::object& d) {
         auto id = std::string(shard(d, 0, 0)["id"].as_string());
         for (auto& c : id) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
         shard(d, 0, 0)["id"] = id;
       },
       "layers[0].shards[0].id is not 64 lowercase hex"},
      {[&](json::object& d) { shard(d, 0, 0)["zip_bytes"] = -1; },
       "layers[0].shards[0].zip_bytes is not a whole number"},
      {[&](json::object& d) { shard(d, 1, 0).erase("key"); }, "layers[1].shards[0].key is missing"},
      {[&](json::object& d) { shard(d, 1, 0).erase("zip_bytes"); }, "layers[1].shards[0] lacks the digest of its zip"},
  };
  for (const auto& [change, expected] : cases) {
    auto doc = json::parse(s.body()).as_object();
    change(doc);
    diagnostics diag;
    auto parsed = parse_manifest(json::serialize(doc), diag);
    ASSERT_FALSE(parsed) << expected;
    EXPECT_EQ(parsed.error(), errc::bad_manifest);
    EXPECT_NE(diag.message.find(expected), std::string::npos) << "wanted: " << expected << "\ngot: " << diag.message;
  }
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"{\"format\":", "manifest: not JSON"}, {"[]", "manifest: not a JSON object"}, {"", "manifest: not JSON"}}) {
    diagnostics diag;
    auto parsed = parse_manifest(text, diag);
    ASSERT_FALSE(parsed) << text;
    EXPECT_NE(diag.message.find(expected), std::string::npos) << diag.message;
  }
}

TEST(manifest, paths_that_are_not_utf8_survive_the_round_trip) {
  sample s;
  s.roots[0].path = std::string("/home/caf\xe9");
  diagnostics diag;
  auto parsed = parse_manifest(s.body(), diag);
  ASSERT_TRUE(parsed) << diag.message;
  EXPECT_EQ(parsed->roots[0].path, std::string("/home/caf\xe9"));
}

TEST(zip_sidecar, holds_the_hex_digest_and_the_size_and_nothing_else) {
  const zip_digest d{net::sha256("zip bytes"), 9};
  EXPECT_EQ(sidecar_key("p/layers/ab.zip"), "p/layers/ab.zip.sha256");
  const auto text = sidecar_text(d);
  EXPECT_EQ(text, net::hex_sha256("zip bytes") + " 9\n");
  EXPECT_EQ(parse_sidecar(text), d);
  const auto hex = net::hex_sha256("zip bytes");
  std::string upper = hex;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& bad : {hex + " 9", hex + "  9\n", hex + " 09\n", hex + " -9\n", hex + " \n", hex + " 9 \n",
                          upper + " 9\n", hex.substr(1) + " 9\n", std::string(), hex + " 9\n\n"}) {
    EXPECT_FALSE(parse_sidecar(bad)) << '"' << bad << '"';
  }
  EXPECT_EQ(parse_sidecar(hex + " 0\n")->zip_bytes, 0u);
}

class zip_digests : public ::testing::Test {
 protected:
  fs::path file() const { return dir_ / "cache" / "zip-digests"; }
  temp_dir dir_;
  sha256_digest shard_a = net::sha256("a"), shard_b = net::sha256("b");
  zip_digest zip_a{net::sha256("zip a"), 100}, zip_b{net::sha256("zip b"), 200};
};

TEST_F(zip_digests, a_digest_counts_only_for_the_object_recorded) {
  auto cache = zip_digest_cache::load(file());
  cache.insert(shard_a, zip_codec::deflate, zip_a, "\"etag-a\"");
  EXPECT_EQ(cache.find(shard_a, zip_codec::deflate, "\"etag-a\"", 100), zip_a);
  EXPECT_EQ(cache.find(shard_a, zip_codec::deflate, "etag-a", 100), zip_a) << "quoted or not, the same ETag";
  EXPECT_FALSE(cache.find(shard_a, zip_codec::deflate, "\"etag-other\"", 100)) << "another object under the same key";
  EXPECT_FALSE(cache.find(shard_a, zip_codec::deflate, "\"etag-a\"", 101)) << "another size";
  EXPECT_EQ(cache.find(shard_a, zip_codec::deflate, "", 100), zip_a) << "without an ETag from storage, the size decides";
  EXPECT_FALSE(cache.find(shard_b, zip_codec::deflate, "\"etag-a\"", 100));
}

TEST_F(zip_digests, the_two_codecs_zips_of_one_shard_are_never_taken_for_each_other) {
  zip_digest zstd_a{net::sha256("zstd zip a"), 100};  // the same size: only the codec tells them apart
  {
    auto cache = zip_digest_cache::load(file());
    cache.insert(shard_a, zip_codec::deflate, zip_a, "");
    EXPECT_FALSE(cache.find(shard_a, zip_codec::zstd, "", 100)) << "the deflate zip's digest is not the zstd one's";
    cache.insert(shard_a, zip_codec::zstd, zstd_a, "");
    EXPECT_EQ(cache.find(shard_a, zip_codec::deflate, "", 100), zip_a) << "recording one codec's keeps the other's";
    diagnostics diag;
    ASSERT_TRUE(cache.save(diag)) << diag.message;
  }
  std::string warning;
  auto loaded = zip_digest_cache::load(file(), &warning);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded.find(shard_a, zip_codec::deflate, "", 100), zip_a);
  EXPECT_EQ(loaded.find(shard_a, zip_codec::zstd, "", 100), zstd_a);
}

TEST(shard_keys, the_key_names_the_codec_and_the_id_does_not_depend_on_it) {
  shard s;
  s.id = net::sha256("entries");
  const auto hex = net::to_hex(s.id);
  EXPECT_EQ(shard_key("p", s, zip_codec::deflate), "p/layers/" + hex + ".zip") << "as stores made before zstd hold it";
  EXPECT_EQ(shard_key("p/", s, zip_codec::zstd), "p/layers/" + hex + ".zstd.zip");
  EXPECT_EQ(codec_of_key(shard_key("p", s, zip_codec::zstd)), zip_codec::zstd);
  EXPECT_EQ(codec_of_key(shard_key("p", s, zip_codec::deflate)), zip_codec::deflate);
  EXPECT_EQ(codec_of_key("p/layers/" + hex + ".zip.sha256"), std::nullopt);
}

TEST_F(zip_digests, saved_and_loaded_back_without_leaving_temporary_files) {
  {
    auto cache = zip_digest_cache::load(file());
    cache.insert(shard_a, zip_codec::deflate, zip_a, "\"etag-a\"");
    cache.insert(shard_b, zip_codec::deflate, zip_b, "");
    diagnostics diag;
    ASSERT_TRUE(cache.save(diag)) << diag.message;
  }
  std::string warning;
  auto cache = zip_digest_cache::load(file(), &warning);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find(shard_a, zip_codec::deflate, "\"etag-a\"", 100), zip_a);
  EXPECT_EQ(cache.find(shard_b, zip_codec::deflate, "\"anything\"", 200), std::nullopt) << "no ETag recorded: one from storage differs";
  EXPECT_EQ(cache.find(shard_b, zip_codec::deflate, "", 200), zip_b);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(file().parent_path())) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1u) << "only the cache file itself";
}

TEST_F(zip_digests, a_damaged_file_is_ignored_with_a_warning_and_rewritten) {
  fs::create_directories(file().parent_path());
  std::ofstream(file()) << "ferry-zip-digests-v1\nnot a line\n";
  std::string warning;
  auto cache = zip_digest_cache::load(file(), &warning);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_NE(warning.find("damaged"), std::string::npos) << warning;
  diagnostics diag;
  ASSERT_TRUE(cache.save(diag)) << diag.message;
  EXPECT_EQ(test::read_file(file()), "ferry-zip-digests-v1\n");
}

TEST_F(zip_digests, a_cache_without_a_file_is_never_saved) {
  zip_digest_cache cache;
  cache.insert(shard_a, zip_codec::deflate, zip_a, "e");
  diagnostics diag;
  EXPECT_TRUE(cache.save(diag));
  EXPECT_FALSE(fs::exists(file()));
}

}  // namespace
}  // namespace ferry::packaging
