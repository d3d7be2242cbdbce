// Walking, hashing with the persistent cache, grouping and layer ids, on real trees in temp dirs.
#include "packaging/error.hpp"
#include "packaging/file_hash.hpp"
#include "packaging/hash_cache.hpp"
#include "packaging/entries_id.hpp"
#include "packaging/layer_scan.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_root.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::packaging {
namespace {

namespace fs = std::filesystem;
using test::temp_dir;

struct scanner {
  temp_dir trace_dir;
  test::trace_root trace{trace_dir / "trace.jsonl", "test:scan"};
  scan_options options;
  diagnostics diag;

  scanner() { options.threads = 2; }

  result<scan_result> scan(std::vector<root_spec> roots, hash_cache& cache) {
    boost::asio::io_context io;
    net::cpu_pool pool(2);
    diag.clear();
    auto done = boost::asio::co_spawn(io, scan_layers(trace.root(), pool, roots, options, cache, nullptr, diag),
                                      boost::asio::use_future);
    io.run();
    return done.get();
  }

  result<scan_result> scan_workspace(const fs::path& dir, hash_cache& cache) {
    return scan({root_spec{dir, root_spec::kind::workspace, 0}}, cache);
  }
};

std::vector<std::string> paths_of(const layer& l) {
  std::vector<std::string> out;
  for (const auto& f : l.files) out.push_back(f.path);
  return out;
}

// Moves the file's mtime forward by a whole second without changing its bytes.
void touch_later(const fs::path& file) {
  fs::last_write_time(file, fs::last_write_time(file) + std::chrono::seconds(1));
}

// Files written "now" are racy and would not be cached; tests age them like files at rest.
void age_tree(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_symlink()) fs::last_write_time(e.path(), fs::file_time_type::clock::now() - std::chrono::hours(1));
  }
}

TEST(layer_scan, walks_sorted_with_excludes_and_keeps_inner_symlinks) {
  temp_dir ws;
  ws.write("b.py", "b");
  ws.write("a/z.py", "z");
  ws.write("a/__pycache__/z.cpython-311.pyc", "x");
  ws.write(".git/HEAD", "ref");
  ws.write(".gitignore", "*.log\n");
  ws.write("run.log", "log");
  fs::create_symlink("a/z.py", ws / "link.py");
  scanner s;
  hash_cache cache;
  auto r = s.scan_workspace(ws.path(), cache);
  ASSERT_TRUE(r) << s.diag.message;
  ASSERT_EQ(r->layers.size(), 1u);
  EXPECT_EQ(paths_of(r->layers[0]), (std::vector<std::string>{".gitignore", "a/z.py", "b.py", "link.py"}));
  const auto& link = r->layers[0].files[3];
  EXPECT_EQ(link.type, file_entry::kind::symlink);
  EXPECT_EQ(link.link_target, "a/z.py");
}

TEST(layer_scan, external_symlinks_are_followed_or_refused_never_dropped) {
  temp_dir ws, outside;
  outside.write("lib/mod.py", "m");
  outside.write("data.txt", "d");
  fs::create_directory_symlink(outside / "lib", ws / "lib");
  fs::create_symlink(outside / "data.txt", ws / "data.txt");
  scanner s;
  hash_cache cache;
  auto r = s.scan_workspace(ws.path(), cache);
  ASSERT_TRUE(r) << s.diag.message;
  EXPECT_EQ(paths_of(r->layers[0]), (std::vector<std::string>{"data.txt", "lib/mod.py"}));
  EXPECT_EQ(r->layers[0].files[1].type, file_entry::kind::regular);

  s.options.follow_external = false;
  auto refused = s.scan_workspace(ws.path(), cache);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), make_error_code(errc::external_symlink));
  EXPECT_NE(s.diag.message.find("external_symlinks"), std::string::npos) << s.diag.message;
}

TEST(layer_scan, symlink_loops_are_errors_that_name_the_link) {
  temp_dir ws;
  ws.write("pkg/a.py", "a");
  fs::create_directory_symlink(ws.path(), ws / "pkg" / "again");  // absolute: followed, and leads back
  scanner s;
  hash_cache cache;
  auto r = s.scan_workspace(ws.path(), cache);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::symlink_loop));
  EXPECT_NE(s.diag.message.find("pkg/again"), std::string::npos) << s.diag.message;

  temp_dir ws2;
  fs::create_symlink("y", ws2 / "x");
  fs::create_symlink("x", ws2 / "y");
  auto r2 = s.scan_workspace(ws2.path(), cache);
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error(), make_error_code(errc::symlink_loop));
}

TEST(layer_scan, dangling_links_are_kept_and_special_files_skipped_with_warnings) {
  temp_dir ws;
  ws.write("a.py", "a");
  fs::create_symlink("missing.py", ws / "gone.py");
  ASSERT_EQ(::mkfifo((ws / "pipe").c_str(), 0600), 0);
  scanner s;
  s.options.large_file_warning = 0;  // every non-empty file is "large" here
  hash_cache cache;
  auto r = s.scan_workspace(ws.path(), cache);
  ASSERT_TRUE(r) << s.diag.message;
  EXPECT_EQ(paths_of(r->layers[0]), (std::vector<std::string>{"a.py", "gone.py"}));
  std::string all;
  for (const auto& w : r->warnings) all += w.path + ": " + w.message + "\n";
  EXPECT_NE(all.find("gone.py: dangling symlink"), std::string::npos) << all;
  EXPECT_NE(all.find("pipe: not a regular file"), std::string::npos) << all;
  EXPECT_NE(all.find("a.py: large file"), std::string::npos) << all;
}

TEST(layer_scan, names_that_are_not_utf8_are_kept_as_bytes) {
  temp_dir ws;
  const std::string name = "caf\xe9.txt";
  ws.write(name, "latin-1 name");
  scanner s;
  hash_cache cache;
  auto r = s.scan_workspace(ws.path(), cache);
  ASSERT_TRUE(r) << s.diag.message;
  EXPECT_EQ(paths_of(r->layers[0]), std::vector<std::string>{name});
}

TEST(layer_scan, cache_means_unchanged_files_are_never_read_and_touch_keeps_the_id) {
  temp_dir ws, cache_dir;
  ws.write("a.py", "alpha");
  ws.write("pkg/b.py", "beta");
  age_tree(ws.path());
  const auto cache_file = cache_dir / "hashes";
  scanner s;
  auto cache = hash_cache::load(cache_file);
  auto first = s.scan_workspace(ws.path(), cache);
  ASSERT_TRUE(first) << s.diag.message;
  EXPECT_EQ(first->hashed_files, 2u);
  ASSERT_TRUE(cache.save(s.diag)) << s.diag.message;

  auto warm_cache = hash_cache::load(cache_file);
  EXPECT_EQ(warm_cache.size(), 2u);
  auto warm = s.scan_workspace(ws.path(), warm_cache);
  ASSERT_TRUE(warm);
  EXPECT_EQ(warm->hashed_files, 0u);
  EXPECT_EQ(warm->layers[0].id, first->layers[0].id);

  touch_later(ws / "a.py");
  auto touched = s.scan_workspace(ws.path(), warm_cache);
  ASSERT_TRUE(touched);
  EXPECT_EQ(touched->hashed_files, 1u);
  EXPECT_EQ(touched->layers[0].id, first->layers[0].id);
}

TEST(layer_scan, edit_add_delete_rename_and_chmod_each_change_the_id) {
  temp_dir ws;
  ws.write("a.py", "alpha");
  ws.write("b.py", "beta");
  scanner s;
  hash_cache cache;
  auto id = [&] {
    auto r = s.scan_workspace(ws.path(), cache);
    EXPECT_TRUE(r) << s.diag.message;
    return r ? r->layers[0].id : sha256_digest{};
  };
  std::set<std::string> seen;
  auto expect_new = [&](const char* what) {
    const auto hex = net::to_hex(id());
    EXPECT_TRUE(seen.insert(hex).second) << what << " gave an id seen before";
  };
  expect_new("start");
  ws.write("a.py", "alpha!");
  expect_new("edit");
  ws.write("c.py", "gamma");
  expect_new("add");
  fs::remove(ws / "c.py");
  EXPECT_FALSE(seen.insert(net::to_hex(id())).second) << "deleting the added file must give the earlier id back";
  fs::remove(ws / "b.py");
  expect_new("delete");
  fs::rename(ws / "a.py", ws / "d.py");
  expect_new("rename");
  fs::permissions(ws / "d.py", fs::perms::owner_exec, fs::perm_options::add);
  expect_new("chmod");
}

TEST(layer_scan, the_same_tree_at_two_paths_has_one_id) {
  temp_dir one, two;
  for (auto* d : {&one, &two}) {
    d->write("m/x.py", "x");
    d->write("y.txt", "y");
  }
  scanner s;
  hash_cache cache;
  auto a = s.scan_workspace(one.path(), cache);
  auto b = s.scan_workspace(two.path(), cache);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->layers[0].id, b->layers[0].id);
}

TEST(layer_scan, site_packages_split_by_distribution_with_namespaces_and_companions) {
  temp_dir sp;
  sp.write("numpy/__init__.py", "np");
  sp.write("numpy.libs/libopenblas.so", "blas");
  sp.write("numpy-1.26.4.dist-info/RECORD",
           "numpy/__init__.py,sha256=x,2\nnumpy.libs/libopenblas.so,,4\nnumpy-1.26.4.dist-info/RECORD,,\n"
           "../../../bin/f2py,,\n");
  sp.write("google/protobuf/__init__.py", "pb");
  sp.write("protobuf-4.25.0.dist-info/RECORD", "google/protobuf/__init__.py,,\n");
  sp.write("google/auth/__init__.py", "auth");
  sp.write("google_auth-2.0.dist-info/RECORD", "google/auth/__init__.py,,\n");
  sp.write("six.py", "six");
  sp.write("numpy/extra_unlisted.py", "added by hand");
  sp.write("numpy/__pycache__/x.cpython-311.pyc", "pyc");
  scanner s;
  hash_cache cache;
  auto r = s.scan({root_spec{sp.path(), root_spec::kind::site_packages, 1}}, cache);
  ASSERT_TRUE(r) << s.diag.message;
  std::map<std::string, std::vector<std::string>> got;
  for (const auto& l : r->layers) {
    EXPECT_EQ(l.root_index, 1u);
    got[l.name] = paths_of(l);
  }
  EXPECT_EQ(got["numpy"], (std::vector<std::string>{"numpy-1.26.4.dist-info/RECORD", "numpy.libs/libopenblas.so",
                                                    "numpy/__init__.py", "numpy/extra_unlisted.py"}));
  EXPECT_EQ(got["protobuf"],
            (std::vector<std::string>{"google/protobuf/__init__.py", "protobuf-4.25.0.dist-info/RECORD"}));
  EXPECT_EQ(got["google-auth"],
            (std::vector<std::string>{"google/auth/__init__.py", "google_auth-2.0.dist-info/RECORD"}));
  EXPECT_EQ(got["six"], std::vector<std::string>{"six.py"});
  EXPECT_EQ(got.size(), 4u);
}

TEST(layer_scan, an_egg_owns_its_top_level_names_and_its_nspkg_pth) {
  // As Debian installs python3-zope.interface: no RECORD, a top_level.txt, and the -nspkg.pth whose line
  // makes zope a namespace package from the directory beside it (so both must land in one layer).
  temp_dir sp;
  sp.write("zope/__init__.py", "__import__('pkg_resources').declare_namespace(__name__)\n");
  sp.write("zope/interface/__init__.py", "i");
  sp.write("zope.interface-5.5.2.egg-info/top_level.txt", "zope\n");
  sp.write("zope.interface-5.5.2.egg-info/PKG-INFO", "Name: zope.interface\n");
  sp.write("zope.interface-5.5.2-nspkg.pth", "import sys\n");
  sp.write("other-nspkg.pth", "import sys\n");  // no such distribution: a layer of its own
  scanner s;
  hash_cache cache;
  auto r = s.scan({root_spec{sp.path(), root_spec::kind::site_packages, 0}}, cache);
  ASSERT_TRUE(r) << s.diag.message;
  std::map<std::string, std::vector<std::string>> got;
  for (const auto& l : r->layers) got[l.name] = paths_of(l);
  EXPECT_EQ(got["zope-interface"],
            (std::vector<std::string>{"zope.interface-5.5.2-nspkg.pth", "zope.interface-5.5.2.egg-info/PKG-INFO",
                                      "zope.interface-5.5.2.egg-info/top_level.txt", "zope/__init__.py",
                                      "zope/interface/__init__.py"}));
  EXPECT_EQ(got["other-nspkg"], std::vector<std::string>{"other-nspkg.pth"});
  EXPECT_EQ(got.size(), 2u);
}

TEST(layer_scan, an_nspkg_pth_goes_with_its_namespace_when_two_eggs_share_it) {
  // As Debian installs python3-ruamel.yaml and python3-ruamel.yaml.clib: both eggs list "ruamel", so no one
  // of them owns the directory, and the -nspkg.pth whose line looks for <sitedir>/ruamel must land beside it.
  temp_dir sp;
  sp.write("ruamel/yaml/__init__.py", "y");
  sp.write("ruamel.yaml-0.17.21.egg-info/top_level.txt", "ruamel\n");
  sp.write("ruamel.yaml-0.17.21.egg-info/PKG-INFO", "Name: ruamel.yaml\n");
  sp.write("ruamel.yaml.clib-0.2.7.egg-info/top_level.txt", "_ruamel_yaml\nruamel\n");
  sp.write("ruamel.yaml.clib-0.2.7.egg-info/PKG-INFO", "Name: ruamel.yaml.clib\n");
  sp.write("_ruamel_yaml.so", "so");
  sp.write("ruamel.yaml-0.17.21-nspkg.pth", "import sys\n");
  scanner s;
  hash_cache cache;
  auto r = s.scan({root_spec{sp.path(), root_spec::kind::site_packages, 0}}, cache);
  ASSERT_TRUE(r) << s.diag.message;
  std::string pth_layer, yaml_layer;
  for (const auto& l : r->layers) {
    for (const auto& p : paths_of(l)) {
      if (p == "ruamel.yaml-0.17.21-nspkg.pth") pth_layer = l.name;
      if (p == "ruamel/yaml/__init__.py") yaml_layer = l.name;
    }
  }
  EXPECT_FALSE(yaml_layer.empty());
  EXPECT_EQ(pth_layer, yaml_layer);
}

TEST(layer_scan, upgrading_one_distribution_changes_one_layer) {
  temp_dir sp;
  sp.write("a/__init__.py", "a1");
  sp.write("a-1.0.dist-info/RECORD", "a/__init__.py,,\n");
  sp.write("b/__init__.py", "b1");
  sp.write("b-1.0.dist-info/RECORD", "b/__init__.py,,\n");
  scanner s;
  hash_cache cache;
  auto before = s.scan({root_spec{sp.path(), root_spec::kind::site_packages, 0}}, cache);
  fs::remove_all(sp / "b-1.0.dist-info");
  sp.write("b-2.0.dist-info/RECORD", "b/__init__.py,,\n");
  sp.write("b/__init__.py", "b2");
  auto after = s.scan({root_spec{sp.path(), root_spec::kind::site_packages, 0}}, cache);
  ASSERT_TRUE(before && after);
  ASSERT_EQ(before->layers.size(), 2u);
  ASSERT_EQ(after->layers.size(), 2u);
  EXPECT_EQ(before->layers[0].id, after->layers[0].id);
  EXPECT_NE(before->layers[1].id, after->layers[1].id);
}

TEST(layer_scan, big_layers_are_cut_into_shards_in_path_order) {
  temp_dir ws;
  for (int i = 0; i < 10; ++i) ws.write(fmt::format("f{}.bin", i), std::string(1000, static_cast<char>('a' + i)));
  scanner s;
  s.options.shard_size = 2500;
  hash_cache cache;
  auto r = s.scan_workspace(ws.path(), cache);
  ASSERT_TRUE(r) << s.diag.message;
  const auto& l = r->layers[0];
  ASSERT_EQ(l.shards.size(), 5u);
  std::size_t next = 0;
  for (const auto& sh : l.shards) {
    EXPECT_EQ(sh.first, next);
    EXPECT_EQ(sh.count, 2u);
    EXPECT_EQ(sh.id, entries_id(l.files_of(sh)));
    next += sh.count;
  }
  EXPECT_EQ(l.id, entries_id(l.files));
}

// Bytes that differ from piece to piece, so a piece put at another offset would show.
std::string pieced_content(std::uint64_t size) {
  std::string out(size, '\0');
  for (std::uint64_t i = 0; i < size; i += 4096) out[i] = static_cast<char>('A' + (i / piece_size) % 26);
  for (std::uint64_t i = 1; i < size; i += 7919) out[i] = static_cast<char>(i % 251);
  return out;
}

TEST(layer_scan, a_file_over_the_piece_size_is_a_shard_per_piece_hashed_once_and_cached) {
  temp_dir ws, cache_dir;
  const auto big = pieced_content(2 * piece_size + 12345);
  ws.write("a.py", "alpha");
  ws.write("lib/big.so", big);
  ws.write("z.py", "zeta");
  age_tree(ws.path());
  scanner s;
  auto cache = hash_cache::load(cache_dir / "hashes");
  auto r = s.scan_workspace(ws.path(), cache);
  ASSERT_TRUE(r) << s.diag.message;
  const auto& l = r->layers[0];
  ASSERT_EQ(l.files.size(), 3u);
  const auto& file = l.files[1];
  ASSERT_EQ(file.path, "lib/big.so");
  ASSERT_EQ(file.piece_digests.size(), 3u);
  std::vector<sha256_digest> expected;
  for (std::uint64_t k = 0; k < 3; ++k) expected.push_back(net::sha256(std::string_view(big).substr(k * piece_size, piece_size)));
  EXPECT_EQ(file.piece_digests, expected);
  EXPECT_EQ(file.digest, piece_root(expected));
  EXPECT_NE(file.digest, net::sha256(big)) << "a cut file's digest is its pieces' root";

  // a.py, then a shard per piece, then z.py: the files after the cut go on in a shard of their own.
  ASSERT_EQ(l.shards.size(), 5u);
  EXPECT_FALSE(l.shards[0].piece);
  EXPECT_EQ(l.files_of(l.shards[0]).front().path, "a.py");
  for (std::size_t k = 0; k < 3; ++k) {
    const auto& sh = l.shards[1 + k];
    ASSERT_TRUE(sh.piece);
    const auto& piece = l.files_of(sh).front();
    EXPECT_EQ(piece.path, "lib/big.so");
    EXPECT_EQ(piece.piece_offset, k * piece_size);
    EXPECT_EQ(piece.piece_length, k < 2 ? piece_size : 12345u);
    EXPECT_EQ(sh.bytes, piece.piece_length);
    EXPECT_EQ(piece.digest, expected[k]);
    entries_id_stream id;
    id.add_piece("lib/big.so", piece.mode(), piece.piece_offset, piece.piece_length, expected[k]);
    EXPECT_EQ(sh.id, id.finish()) << "the offset is part of a piece's id";
  }
  EXPECT_EQ(l.files_of(l.shards[4]).front().path, "z.py");
  EXPECT_EQ(l.id, entries_id(l.files));
  EXPECT_EQ(l.bytes, big.size() + 9);

  ASSERT_TRUE(cache.save(s.diag)) << s.diag.message;
  auto warm_cache = hash_cache::load(cache_dir / "hashes");
  EXPECT_EQ(warm_cache.size(), 3u + 3u) << "three files and three pieces";
  auto warm = s.scan_workspace(ws.path(), warm_cache);
  ASSERT_TRUE(warm) << s.diag.message;
  EXPECT_EQ(warm->hashed_files, 0u);
  EXPECT_EQ(warm->layers[0].files[1].piece_digests, expected);
  EXPECT_EQ(warm->layers[0].id, l.id);
}

TEST(layer_scan, a_file_rewritten_after_the_walk_is_an_error_not_a_wrong_hash) {
  temp_dir ws;
  ws.write("a.py", "alpha");
  scanner s;
  hash_cache cache;
  auto r = s.scan_workspace(ws.path(), cache);
  ASSERT_TRUE(r);
  auto entry = r->layers[0].files[0];
  ws.write("a.py", "alpha, longer now");
  net::sha256_stream h;
  std::vector<char> buffer(4096);
  diagnostics diag;
  auto again = hash_entry(entry, h, buffer, diag);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error(), make_error_code(errc::file_changed));
  fs::remove(ws / "a.py");
  auto gone = hash_entry(entry, h, buffer, diag);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error(), make_error_code(errc::file_changed));
  EXPECT_NE(diag.message.find("vanished"), std::string::npos) << diag.message;
}

// A cache of the version before pieces keeps every file's digest but those of files over the piece size,
// whose digest is now their pieces' root: an upgrade re-hashes only those.
TEST(hash_cache, a_version_1_cache_keeps_its_digests_but_those_of_files_over_the_piece_size) {
  temp_dir dir;
  const std::int64_t old_ns = 1'600'000'000'000'000'000;
  std::vector<hash_cache::record> records = {
      {1, 10, 100, old_ns, net::sha256("small"), 0, 0},
      {1, 11, piece_size + 1, old_ns, net::sha256("whole large file"), 0, 0}};
  std::string bytes("FERRYHC1", 8);
  const std::uint64_t count = records.size();
  bytes.append(reinterpret_cast<const char*>(&count), sizeof count);
  bytes.append(reinterpret_cast<const char*>(records.data()), records.size() * sizeof(hash_cache::record));
  const auto file = dir.write("hashes", bytes);
  std::string warning;
  auto cache = hash_cache::load(file, &warning);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(cache.find(file_key{1, 10, 100, old_ns}), net::sha256("small"));
  EXPECT_FALSE(cache.find(file_key{1, 11, piece_size + 1, old_ns}));
  diagnostics diag;
  ASSERT_TRUE(cache.save(diag)) << diag.message;
  EXPECT_EQ(test::read_file(file).substr(0, 8), "FERRYHC2");
  EXPECT_EQ(hash_cache::load(file).find(file_key{1, 10, 100, old_ns}), net::sha256("small"));
}

TEST(hash_cache, damaged_files_are_ignored_and_racy_entries_not_kept) {
  temp_dir dir;
  const auto file = dir.write("hashes", "FERRYHC1 but then garbage");
  std::string warning;
  auto cache = hash_cache::load(file, &warning);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_NE(warning.find("damaged"), std::string::npos) << warning;
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  file_key old_key{1, 2, 3, now_ns - 3'600'000'000'000};
  file_key fresh_key{1, 3, 3, now_ns};
  cache.insert(old_key, net::sha256("old"), is_racy(old_key.mtime_ns));
  cache.insert(fresh_key, net::sha256("fresh"), is_racy(fresh_key.mtime_ns));
  diagnostics diag;
  ASSERT_TRUE(cache.save(diag)) << diag.message;
  auto reloaded = hash_cache::load(file);
  EXPECT_EQ(reloaded.size(), 1u);
  EXPECT_EQ(reloaded.find(old_key), net::sha256("old"));
  EXPECT_FALSE(reloaded.find(fresh_key));
  EXPECT_FALSE(reloaded.find(file_key{1, 2, 4, old_key.mtime_ns})) << "a different size is a different file";
}

}  // namespace
}  // namespace ferry::packaging
