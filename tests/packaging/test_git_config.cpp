#include "packaging/git_config.hpp"
#include "packaging/git_repository.hpp"

#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace ferry::packaging {
namespace {

namespace fs = std::filesystem;
using test::temp_dir;

std::optional<std::string> last_value(std::string_view text, std::string_view name) {
  std::optional<std::string> out;
  for (const auto& e : parse_git_config(text)) {
    if (e.name == name) out = e.value;
  }
  return out;
}

TEST(git_config, sections_and_keys_are_case_insensitive_and_the_last_value_wins) {
  EXPECT_EQ(last_value("[core]\n\texcludesFile = a\n[CORE]\nEXCLUDESFILE=b\n", "core.excludesfile"), "b");
  EXPECT_EQ(last_value("[core] excludesfile = same-line\n", "core.excludesfile"), "same-line");
  EXPECT_EQ(last_value("[core \"Sub\"]\nexcludesfile = x\n", "core.excludesfile"), std::nullopt);
  EXPECT_EQ(parse_git_config("[core \"Sub\"]\nk = x\n").at(0).name, "core.Sub.k");
  EXPECT_EQ(parse_git_config("[Core.Sub]\nk = x\n").at(0).name, "core.sub.k");
}

TEST(git_config, values_have_quotes_escapes_comments_and_continuations) {
  EXPECT_EQ(last_value("[c]\nk = \"a b ; c\" # comment\n", "c.k"), "a b ; c");
  EXPECT_EQ(last_value("[c]\nk =   a   b   ; comment\n", "c.k"), "a   b");
  EXPECT_EQ(last_value("[c]\nk = a\\\nb\n", "c.k"), "ab");
  EXPECT_EQ(last_value("[c]\nk = \"x\\\"y\\\\z\\t\"\n", "c.k"), "x\"y\\z\t");
  EXPECT_EQ(last_value("[c]\r\nk = crlf\r\n", "c.k"), "crlf");
  EXPECT_EQ(last_value("; top\n# top\n[c]\n  ; k = no\n k = yes\n", "c.k"), "yes");
  const auto bare = parse_git_config("[c]\nflag\n");
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_FALSE(bare[0].value);
}

TEST(git_config, a_malformed_line_ends_the_parse) {
  EXPECT_EQ(parse_git_config("[c]\nk = 1\n[bad\nk = 2\n").size(), 1u);
  EXPECT_EQ(parse_git_config("[c]\nk = \"open\nj = 2\n").size(), 0u);
  EXPECT_EQ(parse_git_config("[c]\nk = \\q\n").size(), 0u);
  EXPECT_TRUE(parse_git_config("k = before any section\n").empty());
}

TEST(git_config, tilde_paths_expand_to_the_home) {
  EXPECT_EQ(expand_config_path("~/ignore", "/h"), "/h/ignore");
  EXPECT_EQ(expand_config_path("~", "/h"), "/h");
  EXPECT_EQ(expand_config_path("/abs/x", ""), "/abs/x");
  EXPECT_EQ(expand_config_path("~/x", ""), std::nullopt);
  EXPECT_EQ(expand_config_path("~root/x", ""), "/root/x");
  EXPECT_EQ(expand_config_path("~no-such-user-here/x", "/h"), std::nullopt);
}

// The least git accepts as a repository: HEAD, objects/ and refs/.
void make_git_dir(const temp_dir& t, const std::string& dir) {
  t.write(dir + "/HEAD", "ref: refs/heads/main\n");
  fs::create_directories(t / dir / "objects");
  fs::create_directories(t / dir / "refs");
}

TEST(git_repository, found_through_a_gitdir_file_with_its_common_directory) {
  const temp_dir t;
  make_git_dir(t, "main/.git");
  t.write("main/.git/worktrees/w/HEAD", "0000\n");
  t.write("main/.git/worktrees/w/commondir", "../..\n");
  t.write("w/.git", "gitdir: ../main/.git/worktrees/w\n");
  fs::create_directories(t / "w/sub/deeper");
  const auto repo = find_git_repository(t / "w/sub/deeper");
  ASSERT_TRUE(repo);
  EXPECT_EQ(repo->top, t / "w");
  EXPECT_EQ(repo->git_dir, t / "main/.git/worktrees/w");
  EXPECT_EQ(repo->common_dir, t / "main/.git");
}

TEST(git_repository, a_dot_git_that_is_not_a_repository_is_passed_over) {
  const temp_dir t;
  make_git_dir(t, "outer/.git");
  t.write("outer/inner/.git", "gitdir: /nowhere\n");
  fs::create_directories(t / "outer/inner/x");
  const auto repo = find_git_repository(t / "outer/inner/x");
  ASSERT_TRUE(repo);
  EXPECT_EQ(repo->top, t / "outer");
}

TEST(git_repository, outer_files_name_their_patterns_base) {
  const temp_dir t;
  make_git_dir(t, "r/.git");
  t.write("r/.git/info/exclude", "*.log\n");
  t.write("r/.gitignore", "a\n");
  t.write("r/ws/.gitignore", "b\n");  // the root's own: read by the walker, not here
  t.write("home/.gitconfig", "[include]\n  path = more.inc\n");
  t.write("home/more.inc", "[core]\n  excludesFile = ~/global\n");
  t.write("home/global", "*.tmp\n");
  fs::create_directories(t / "r/ws/pkg");
  git_environment env;
  env.home = (t / "home").string();
  env.no_system = true;
  const auto files = outer_ignore_files(t / "r/ws/pkg", env);
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].name, "../.gitignore");
  EXPECT_EQ(files[0].contents, "b\n");
  EXPECT_EQ(files[0].root_path, "pkg");
  EXPECT_EQ(files[1].name, "../../.gitignore");
  EXPECT_EQ(files[1].root_path, "ws/pkg");
  EXPECT_EQ(files[2].name, (t / "r/.git/info/exclude").string());
  EXPECT_EQ(files[2].root_path, "ws/pkg");
  EXPECT_EQ(files[3].name, (t / "home/global").string());
  EXPECT_EQ(files[3].contents, "*.tmp\n");
}

}  // namespace
}  // namespace ferry::packaging
