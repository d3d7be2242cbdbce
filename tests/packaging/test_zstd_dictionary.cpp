// The zstd dictionary of a shard: the same files give the same bytes, too few or too small files give none
// (symlinks, already compressed and large files never count), a file that cannot be read is named, and on
// real Python modules (Debian's standard library) the dictionary pays for itself.
#include "packaging/error.hpp"
#include "packaging/tree_walker.hpp"
#include "packaging/zstd_dictionary.hpp"

#include "support/temp_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zstd.h>

#include <filesystem>

namespace ferry::packaging {
namespace {

namespace fs = std::filesystem;

std::vector<file_entry> walk(const fs::path& root, std::span<const std::string> only = {}) {
  diagnostics diag;
  walk_options options;
  options.read_ignore_files = false;
  auto walked = walk_tree(root, options, diag, only);
  if (!walked) throw std::runtime_error(diag.message);
  return std::move(walked->files);
}

const fs::path stdlib = "/usr/lib/python3.11";
const std::vector<std::string> stdlib_packages = {"asyncio", "email", "json", "http", "xml", "unittest", "logging",
                                                  "urllib", "importlib", "concurrent"};

std::string module_text(int i) {
  std::string out = fmt::format("# module {}\nimport os\nimport sys\n\n", i);
  for (int f = 0; f < 60; ++f)
    out += fmt::format("def handler_{}_{}(request, timeout=None):\n    return request.session.get(timeout or {})\n\n",
                       i % 7, f, i * f);
  return out;
}

// `count` small modules, in a tree of their own, with what must never count beside them.
fs::path small_tree(const test::temp_dir& dir, int count) {
  const auto root = dir / "tree";
  fs::create_directories(root / "pkg");
  for (int i = 0; i < count; ++i) dir.write(fmt::format("tree/pkg/m{:03}.py", i), module_text(i));
  for (int i = 0; i < 20; ++i) {
    fs::create_symlink(fmt::format("m{:03}.py", i), root / "pkg" / fmt::format("link{:03}.py", i));
    dir.write(fmt::format("tree/pkg/data{:03}.gz", i), module_text(i));        // already compressed
    dir.write(fmt::format("tree/pkg/big{:03}.py", i), std::string(16 << 10, 'b'));  // not under the limit
  }
  dir.write("tree/pkg/empty.py", "");
  return root;
}

TEST(zstd_dictionary, the_same_files_give_the_same_dictionary_bytes) {
  const auto files = walk(stdlib, stdlib_packages);
  diagnostics diag;
  auto first = train_dictionary(files, diag);
  ASSERT_TRUE(first) << diag.message;
  auto second = train_dictionary(files, diag);
  ASSERT_TRUE(second) << diag.message;
  ASSERT_FALSE(first->empty());
  EXPECT_EQ(*first, *second);
  EXPECT_LE(first->size(), 112u << 10);
  EXPECT_NE(ZSTD_getDictID_fromDict(first->data(), first->size()), 0u);  // a trained dictionary, with its id
  // The same bytes elsewhere: nothing but the content counts.
  test::temp_dir dir;
  fs::create_directories(dir / "copy");
  fs::copy(stdlib / "email", dir / "copy" / "email", fs::copy_options::recursive);
  diagnostics d;
  auto here = train_dictionary(walk(stdlib, std::vector<std::string>{"email"}), d);
  auto there = train_dictionary(walk(dir / "copy"), d);
  ASSERT_TRUE(here && there) << d.message;
  EXPECT_EQ(*here, *there);
}

TEST(zstd_dictionary, fewer_than_64_small_files_or_256_kib_give_none_and_only_regular_small_files_count) {
  test::temp_dir dir;
  diagnostics diag;
  auto none = train_dictionary(walk(small_tree(dir, 63)), diag);
  ASSERT_TRUE(none) << diag.message;
  EXPECT_EQ(*none, "") << "63 modules";
  test::temp_dir more;
  auto some = train_dictionary(walk(small_tree(more, 80)), diag);
  ASSERT_TRUE(some) << diag.message;
  EXPECT_NE(*some, "") << "80 modules of " << module_text(1).size() << " bytes";
  // 100 files, but of 1 KiB each.
  test::temp_dir tiny;
  for (int i = 0; i < 100; ++i) tiny.write(fmt::format("t/m{:03}.py", i), module_text(i).substr(0, 1024));
  auto small = train_dictionary(walk(tiny / "t"), diag);
  ASSERT_TRUE(small) << diag.message;
  EXPECT_EQ(*small, "");
}

TEST(zstd_dictionary, a_file_gone_since_it_was_hashed_is_named_as_the_zip_writer_names_it) {
  test::temp_dir dir;
  auto files = walk(small_tree(dir, 80));
  const auto gone = std::find_if(files.begin(), files.end(), [](const auto& f) { return f.path == "pkg/m005.py"; });
  ASSERT_NE(gone, files.end());
  fs::remove(gone->source);
  diagnostics diag;
  auto r = train_dictionary(files, diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::file_changed));
  EXPECT_NE(diag.message.find("pkg/m005.py: "), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find(" vanished after it was hashed"), std::string::npos) << diag.message;
}

// Each small file of Debian's Python standard library (one shard, say) compressed on its own at level 3,
// without and with the dictionary: measured, about 10% smaller counting the dictionary.
TEST(zstd_dictionary, small_python_modules_compress_smaller_with_it_than_without_counting_the_dictionary) {
  const auto files = walk(stdlib);
  diagnostics diag;
  auto dict = train_dictionary(files, diag);
  ASSERT_TRUE(dict) << diag.message;
  ASSERT_FALSE(dict->empty());
  auto* cctx = ZSTD_createCCtx();
  auto* cdict = ZSTD_createCDict(dict->data(), dict->size(), 3);
  std::uint64_t alone = 0, with = 0;
  std::string out(ZSTD_compressBound(dictionary_file_limit), '\0');
  for (const auto& f : files) {
    if (f.type != file_entry::kind::regular || f.key.size >= dictionary_file_limit) continue;
    const auto data = test::read_file(f.source);
    alone += ZSTD_compressCCtx(cctx, out.data(), out.size(), data.data(), data.size(), 3);
    with += ZSTD_compress_usingCDict(cctx, out.data(), out.size(), data.data(), data.size(), cdict);
  }
  ZSTD_freeCDict(cdict);
  ZSTD_freeCCtx(cctx);
  RecordProperty("alone", std::to_string(alone));
  RecordProperty("with_dictionary", std::to_string(with + dict->size()));
  EXPECT_LT(with + dict->size(), alone * 95 / 100) << "alone " << alone << ", with " << with << " + " << dict->size();
}

}  // namespace
}  // namespace ferry::packaging
