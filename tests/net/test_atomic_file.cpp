// The one atomic file writer: whole versions only, under concurrent writers, and nothing left on failure.
#include "net/atomic_file.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;

// A version is whole when it is one letter repeated, as every writer below writes.
bool whole(const std::string& text) {
  return !text.empty() && text.find_first_not_of(text[0]) == std::string::npos;
}

TEST(atomic_file, concurrent_writers_and_a_reader_only_ever_see_whole_versions) {
  temp_dir dir;
  const auto file = dir / "state.json";
  diagnostics diag;
  ASSERT_TRUE(net::write_file_atomically(file, std::string(100000, 'a'), diag)) << diag.message;
  std::atomic<bool> done{false};
  std::atomic<int> torn{0}, failed{0};
  std::thread reader([&] {
    while (!done) {
      if (!whole(read_file(file))) ++torn;
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < 8; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 50; ++i) {
        diagnostics d;
        // Sizes differ, so a write into another writer's temporary would show as a mix.
        const std::string text(50000 + 7919 * static_cast<std::size_t>(w), static_cast<char>('b' + w));
        if (!net::write_file_atomically(file, text, d)) ++failed;
      }
    });
  }
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(torn, 0);
  EXPECT_TRUE(whole(read_file(file)));
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) entries += e.path() != file ? 1 : 0;
  EXPECT_EQ(entries, 0u) << "a temporary was left behind";
}

TEST(atomic_file, a_failed_write_names_the_file_keeps_the_old_version_and_leaves_nothing) {
  temp_dir dir;
  const auto file = dir / "keep.txt";
  diagnostics diag;
  ASSERT_TRUE(net::write_file_atomically(file, "old\n", diag));
  // A directory where the rename must land: the rename fails after the temporary was written.
  const auto blocked = dir / "blocked";
  fs::create_directories(blocked / "inside");
  auto r = net::write_file_atomically(blocked, "new\n", diag);
  ASSERT_FALSE(r);
  EXPECT_NE(diag.message.find(blocked.string()), std::string::npos) << diag.message;
  EXPECT_EQ(read_file(file), "old\n");
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) entries += 1;
  EXPECT_EQ(entries, 2u) << "only keep.txt and blocked/";
  // A missing directory is made unless the caller says not to.
  EXPECT_FALSE(net::write_file_atomically(dir / "a" / "b.txt", "x", diag, {.mode = 0600, .make_parent = false}));
  EXPECT_TRUE(net::write_file_atomically(dir / "a" / "b.txt", "x", diag)) << diag.message;
  struct stat st {};
  ASSERT_EQ(::stat((dir / "a" / "b.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(atomic_file, temporaries_differ_within_and_across_calls) {
  const auto a = net::temporary_beside("/x/registry.json");
  const auto b = net::temporary_beside("/x/registry.json");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.parent_path(), fs::path("/x"));
  EXPECT_TRUE(a.filename().string().starts_with(".registry.json.ferry-")) << a;
}

}  // namespace
}  // namespace ferry::test
