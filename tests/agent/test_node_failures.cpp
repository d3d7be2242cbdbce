// Failures on a node point at their cause: a traceback through a layer names the workstation's file (in
// what Python prints when the program dies, in the program's own traceback.print_exc() and in a thread's),
// while __file__ stays the node's; and a file or module that the workspace's .gitignore kept from shipping
// gets one line naming the rule, which git itself confirms, and `ferry pack --explain` (once for a map). Local nodes,
// moto_server as storage, a git repository as the workspace, a venv of Debian's python3 (the nodes' too).
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include "local_run.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

class node_failures : public local_nodes {
 protected:
  node_failures() : local_nodes("ferry-fail") {}

  void SetUp() override {
    local_nodes::SetUp();
    if (!moto_) return;
    ASSERT_NO_FATAL_FAILURE(make_project());
    ASSERT_EQ(run_ferry({"nodes", "up", "1"}, env()).exit_code, 0);
  }

  void make_project() {
    write_file(project() / ".gitignore", ".venv/\ndata/\nlocal_settings.py\n");
    write_file(project() / "stats" / "__init__.py", "");
    write_file(project() / "stats" / "core.py", "def fail():\n    raise ValueError('no mean of nothing')\n");
    write_file(project() / "main.py",
               "import sys, threading, traceback\n"
               "import stats.core\n"
               "what = sys.argv[1]\n"
               "if what == 'fail':\n"
               "    print('file', stats.core.__file__)\n"
               "    try:\n"
               "        stats.core.fail()\n"
               "    except ValueError:\n"
               "        traceback.print_exc()\n"
               "    t = threading.Thread(target=stats.core.fail)\n"
               "    t.start()\n"
               "    t.join()\n"
               "    stats.core.fail()\n"
               "elif what == 'import':\n"
               "    import local_settings\n"
               "else:\n"
               "    open(what).read()\n");
    write_file(project() / "data" / "config.yaml", "threshold: 3\n");
    write_file(project() / "local_settings.py", "TOKEN = 'x'\n");
    ASSERT_EQ(run({"git", "init", "-q", project().string()}).exit_code, 0);
    ASSERT_EQ(run({"/usr/bin/python3", "-m", "venv", "--without-pip", (project() / ".venv").string()}).exit_code, 0);
    write_file(project() / "ferry.toml", "[packaging]\npython = \".venv/bin/python\"\n");
  }
};

TEST_F(node_failures, a_traceback_names_the_workstation_file_and_file_stays_the_nodes) {
  const auto r = run_ferry({"run", "--", "python3", "main.py", "fail"}, env());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // The program reads __file__: the node's copy, in a layer.
  EXPECT_TRUE(contains(r.out, "/layers/")) << r.out;
  EXPECT_FALSE(contains(r.out, project().string())) << r.out;
  // Printed three times (the program's print_exc, the thread's, the uncaught one), each naming the
  // workstation's file, with the source line read from the node's copy.
  const auto frame = fmt::format("File \"{}/stats/core.py\", line 2, in fail\n", project().string());
  EXPECT_EQ(occurrences(r.err, frame), 3u) << r.err;
  EXPECT_EQ(occurrences(r.err, "    raise ValueError('no mean of nothing')\n"), 3u) << r.err;
  EXPECT_TRUE(contains(r.err, fmt::format("File \"{}/main.py\", line 13, in <module>\n", project().string())))
      << r.err;
  EXPECT_TRUE(contains(r.err, "Exception in thread ")) << r.err;
  EXPECT_FALSE(contains(r.err, "/layers/")) << r.err;
  // The map is in the command's environment, for tools there too.
  const auto map = run_ferry({"run", "--", "sh", "-c", "cat \"$FERRY_PATH_MAP\""}, env());
  ASSERT_EQ(map.exit_code, 0) << map.err;
  EXPECT_TRUE(contains(map.out, fmt::format("\"{}\"", project().string()))) << map.out;
}

TEST_F(node_failures, a_file_or_module_the_gitignore_kept_out_gets_a_hint_naming_the_rule) {
  // git's own verdict, which the hint must name.
  const auto git = run({"git", "-C", project().string(), "check-ignore", "-v", "data/config.yaml", "local_settings.py"});
  ASSERT_EQ(git.exit_code, 0) << git.err;
  EXPECT_TRUE(contains(git.out, ".gitignore:2:data/\tdata/config.yaml")) << git.out;
  EXPECT_TRUE(contains(git.out, ".gitignore:3:local_settings.py\tlocal_settings.py")) << git.out;

  const auto opened = run_ferry({"run", "--", "python3", "main.py", "data/config.yaml"}, env());
  EXPECT_EQ(opened.exit_code, 1) << opened.err;
  EXPECT_TRUE(contains(opened.err, "FileNotFoundError: [Errno 2] No such file or directory: 'data/config.yaml'\n"))
      << opened.err;
  EXPECT_TRUE(contains(opened.err, "ferry: hint: data/config.yaml was not shipped: excluded by .gitignore:2: data/ "
                                   "(ferry pack --explain data/config.yaml)\n"))
      << opened.err;

  const auto imported = run_ferry({"run", "--", "python3", "main.py", "import"}, env());
  EXPECT_EQ(imported.exit_code, 1) << imported.err;
  EXPECT_TRUE(contains(imported.err, "ferry: hint: local_settings.py was not shipped: excluded by .gitignore:3: "
                                     "local_settings.py (ferry pack --explain local_settings.py)\n"))
      << imported.err;

  // A map says it once, however many of its tasks failed alike.
  const auto mapped = run_ferry(
      {"map", "--range", "1..3", "--retries", "0", "--", "python3", "main.py", "data/config.yaml", "{}"}, env());
  EXPECT_NE(mapped.exit_code, 0) << mapped.err;
  EXPECT_EQ(occurrences(mapped.err, "ferry: hint: data/config.yaml was not shipped: excluded by .gitignore:2: data/"),
            1u)
      << mapped.err;

  // Never a guess: a file missing here too, or one outside the workspace (though it is there), gets no hint.
  write_file(home_ / "data" / "config.yaml", "threshold: 3\n");
  for (const auto* missing : {"data/other.yaml", "../data/config.yaml"}) {
    const auto r = run_ferry({"run", "--", "python3", "main.py", missing}, env());
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "FileNotFoundError")) << r.err;
    EXPECT_FALSE(contains(r.err, "hint")) << missing << ": " << r.err;
  }
}

}  // namespace
}  // namespace ferry::test
