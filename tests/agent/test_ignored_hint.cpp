// The hint for a failure that the ignore rules caused: what a Python program's stderr says it did not find,
// and the line naming the rule only when the thing is in the workspace, exists here and a rule kept it out
// (git's own verdict on the same workspace is the oracle).
#include "agent/run/ignored_hint.hpp"

#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include "local_run.hpp"

#include <gtest/gtest.h>

namespace ferry::test {
namespace {

using agent::missing_name;

TEST(ignored_hint, reads_the_missing_file_or_module_from_the_last_lines) {
  const auto file = agent::missing_in(
      "Traceback (most recent call last):\n  File \"/x/main.py\", line 1, in <module>\n"
      "FileNotFoundError: [Errno 2] No such file or directory: 'data/config.yaml'\n");
  ASSERT_TRUE(file);
  EXPECT_EQ(file->what, missing_name::kind::file);
  EXPECT_EQ(file->name, "data/config.yaml");
  const auto module = agent::missing_in("ModuleNotFoundError: No module named 'pkg.sub'\r\n\n");
  ASSERT_TRUE(module);
  EXPECT_EQ(module->what, missing_name::kind::module);
  EXPECT_EQ(module->name, "pkg.sub");
  // A name Python had to escape, one error among earlier output, and a rename's two paths say nothing.
  EXPECT_FALSE(agent::missing_in("FileNotFoundError: [Errno 2] No such file or directory: 'it\\'s'\n"));
  EXPECT_FALSE(agent::missing_in("FileNotFoundError: [Errno 2] No such file or directory: 'a' -> 'b'\n"));
  EXPECT_FALSE(agent::missing_in("FileNotFoundError: [Errno 2] No such file or directory: 'a'\nx\ny\nz\n"));
  EXPECT_FALSE(agent::missing_in("ValueError: 'a'\n"));
}

TEST(ignored_hint, names_the_rule_only_for_what_a_rule_kept_out_of_the_workspace) {
  temp_dir home;
  const auto ws = home.path() / "ws";
  write_file(ws / ".gitignore", "# local files\ndata/\nlocal_settings.py\n");
  write_file(ws / "data" / "config.yaml", "x: 1\n");
  write_file(ws / "local_settings.py", "X = 1\n");
  write_file(ws / "shipped.yaml", "x: 1\n");
  write_file(ws / "pkg" / "__init__.py", "");
  write_file(home.path() / "data" / "config.yaml", "x: 1\n");
  ASSERT_EQ(run({"git", "init", "-q", ws.string()}).exit_code, 0);
  const auto git = run({"git", "-C", ws.string(), "check-ignore", "-v", "data/config.yaml", "local_settings.py"});
  ASSERT_TRUE(contains(git.out, ".gitignore:2:data/\tdata/config.yaml")) << git.out;
  ASSERT_TRUE(contains(git.out, ".gitignore:3:local_settings.py")) << git.out;

  const packaging::walk_options w;
  const auto hint = [&](const std::string& last_line) {
    return agent::ignored_hint(last_line + "\n", ws, "/node/layers/abc", w).value_or("(none)");
  };
  const std::string no_file = "FileNotFoundError: [Errno 2] No such file or directory: ";
  EXPECT_EQ(hint(no_file + "'data/config.yaml'"),
            "data/config.yaml was not shipped: excluded by .gitignore:2: data/ (ferry pack --explain data/config.yaml)");
  EXPECT_EQ(hint(no_file + "'/node/layers/abc/data/./config.yaml'"),
            "data/config.yaml was not shipped: excluded by .gitignore:2: data/ (ferry pack --explain data/config.yaml)");
  EXPECT_EQ(hint("ModuleNotFoundError: No module named 'local_settings'"),
            "local_settings.py was not shipped: excluded by .gitignore:3: local_settings.py "
            "(ferry pack --explain local_settings.py)");
  // Shipped, missing here too, outside the workspace (though there), a module no ignored file provides.
  EXPECT_EQ(hint(no_file + "'shipped.yaml'"), "(none)");
  EXPECT_EQ(hint(no_file + "'data/other.yaml'"), "(none)");
  EXPECT_EQ(hint(no_file + "'../data/config.yaml'"), "(none)");
  EXPECT_EQ(hint(no_file + "'" + (home.path() / "data" / "config.yaml").string() + "'"), "(none)");
  EXPECT_EQ(hint("ModuleNotFoundError: No module named 'pkg.gone'"), "(none)");
  EXPECT_EQ(hint("ModuleNotFoundError: No module named 'yaml'"), "(none)");
}

}  // namespace
}  // namespace ferry::test
