// The node's Python sees the workstation's environment: the same modules from the same places, the same
// distributions, entry points and package data, and sys.path entry for entry. Real project shapes in a venv
// of Debian's python3 (the interpreter local nodes run too): an editable install through setuptools' finder
// (PEP 660) of a project beside the workspace, an editable src layout inside it, a .pth file that imports, a
// distribution that ships a module of the standard library's name, a namespace package split over the
// workspace and site-packages, and one made by a -nspkg.pth file. tests/peers/env_probe.py prints what a
// program sees; its output on the workstation and through `ferry run` (eager and lazy start) and `ferry map`
// must be the same. A node's python3 of another version is refused, another patch level warned of.
//
// Local nodes share this machine's file system, so a node could read the workstation's project and venv
// where a real node cannot: each node gets empty file systems mounted over them in its mount namespace.
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include "local_run.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;

std::string pyproject(const std::string& name, const std::string& more) {
  return fmt::format(
      "[build-system]\nrequires = [\"setuptools\"]\nbuild-backend = \"setuptools.build_meta\"\n"
      "[project]\nname = \"{}\"\nversion = \"1.2\"\n{}",
      name, more);
}

class node_python : public local_nodes {
 protected:
  node_python() : local_nodes("ferry-py") {}

  void SetUp() override {
    local_nodes::SetUp();
    if (!moto_) return;
    ASSERT_NO_FATAL_FAILURE(make_shapes());
  }

  fs::path flatlib() const { return home_ / "flatlib"; }
  fs::path python() const { return project() / ".venv" / "bin" / "python"; }

  // A wheel of `dir` built by setuptools, editable or not, into home/wheels.
  void wheel(const fs::path& dir, bool editable) {
    const auto r = run({"/usr/bin/python3", "-c",
                        fmt::format("import setuptools.build_meta as b; b.{}({:?})",
                                    editable ? "build_editable" : "build_wheel", (home_ / "wheels").string())},
                       process_options{.cwd = dir});
    ASSERT_EQ(r.exit_code, 0) << dir << ": " << r.err;
  }

  void make_shapes() {
    // The workspace: a namespace package's first half, and a src layout installed editable.
    write_file(project() / ".gitignore", ".venv/\nbuild/\n*.egg-info/\n");
    write_file(project() / "nspkg" / "a.py", "A = 1\n");
    write_file(project() / "env_probe.py", read_file(fs::path(FERRY_SOURCE_DIR) / "tests/peers/env_probe.py"));
    write_file(project() / "pyproject.toml",
               pyproject("wslib", "[tool.setuptools.packages.find]\nwhere = [\"src\"]\n"
                                  "[tool.setuptools.package-data]\nwslib = [\"*.txt\"]\n"));
    write_file(project() / "src" / "wslib" / "__init__.py", "W = 1\n");
    write_file(project() / "src" / "wslib" / "data.txt", "ws data\n");
    // Beside the workspace: a flat layout installed editable, which setuptools serves with its finder.
    write_file(flatlib() / "pyproject.toml",
               pyproject("flatlib", "[project.entry-points.console_scripts]\nflat-cli = \"flatlib:main\"\n"
                                    "[tool.setuptools]\npackages = [\"flatlib\"]\n"
                                    "[tool.setuptools.package-data]\nflatlib = [\"*.txt\"]\n"));
    write_file(flatlib() / "flatlib" / "__init__.py", "def main():\n    pass\n");
    write_file(flatlib() / "flatlib" / "data.txt", "flat data\n");
    // Distributions: one ships a module named as the standard library's colorsys, one the second half of
    // the namespace package, one a .pth file whose line imports.
    const auto dists = home_ / "dists";
    write_file(dists / "shadow" / "pyproject.toml", pyproject("shadowdist", "[tool.setuptools]\npy-modules = [\"colorsys\"]\n"));
    write_file(dists / "shadow" / "colorsys.py", "SHADOW = True\n");
    write_file(dists / "ns" / "pyproject.toml",
               pyproject("nsdist", "[tool.setuptools]\npackages = [\"nspkg\"]\n"));
    write_file(dists / "ns" / "nspkg" / "b.py", "B = 2\n");
    write_file(dists / "pth" / "pyproject.toml",
               pyproject("pthdist", "[tool.setuptools]\npy-modules = [\"pthmark\"]\n"));
    write_file(dists / "pth" / "pthmark.py", "import os\nos.environ['PTHMARK'] = 'ran'\n");
    // A namespace package the old way (setuptools' namespace_packages): the wheel's -nspkg.pth makes it, and
    // its line reads `sitedir` from the frame that runs it.
    write_file(dists / "nsp" / "setup.py",
               "from setuptools import setup\n"
               "setup(name='nspdist', version='1.2', packages=['nsp', 'nsp.sub'], namespace_packages=['nsp'])\n");
    write_file(dists / "nsp" / "nsp" / "__init__.py", "__import__('pkg_resources').declare_namespace(__name__)\n");
    write_file(dists / "nsp" / "nsp" / "sub" / "__init__.py", "S = 1\n");

    ASSERT_EQ(run({"/usr/bin/python3", "-m", "venv", "--without-pip", (project() / ".venv").string()}).exit_code, 0);
    ASSERT_NO_FATAL_FAILURE(wheel(project(), true));
    ASSERT_NO_FATAL_FAILURE(wheel(flatlib(), true));
    for (const auto* d : {"shadow", "ns", "pth", "nsp"}) ASSERT_NO_FATAL_FAILURE(wheel(dists / d, false));
    std::vector<std::string> install = {"/usr/bin/python3", "-m", "pip", "--python", python().string(), "install",
                                        "--no-index", "--no-deps", "--quiet"};
    for (const auto& e : fs::directory_iterator(home_ / "wheels")) install.push_back(e.path().string());
    const auto installed = run(install);
    ASSERT_EQ(installed.exit_code, 0) << installed.err;
    const auto site = run({python().string(), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"});
    ASSERT_EQ(site.exit_code, 0) << site.err;
    site_ = site.out.substr(0, site.out.find('\n'));
    // A .pth that imports, as a package's own installer step might leave one.
    write_file(fs::path(site_) / "zz_pthdist.pth", "import pthmark\n");
    write_file(project() / "ferry.toml", "[packaging]\npython = \".venv/bin/python\"\n");
  }

  std::vector<std::string> probe_args() const {
    return {"env_probe.py", "flatlib", "wslib", "nspkg.a", "nspkg.b", "nsp.sub", "colorsys", "--read",
            "flatlib:data.txt", "--read", "wslib:data.txt"};
  }

  // What the probe prints on the workstation, run as the user would run it.
  std::string local_probe() const {
    std::vector<std::string> argv = {python().string()};
    for (const auto& a : probe_args()) argv.push_back(a);
    const auto r = run(argv, process_options{.cwd = project()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  // `count` nodes up, each with the workstation's project, venv and flatlib hidden from it.
  void nodes_up(int count) {
    ASSERT_EQ(run_ferry({"nodes", "up", std::to_string(count)}, env()).exit_code, 0);
    std::size_t masked = 0;
    for (const auto& [dir, pid] : node_mount_namespaces(home_.path())) {
      ASSERT_FALSE(pid.empty()) << "no process holds the mount namespace of " << dir;
      for (const auto& hidden : {project(), flatlib()}) {
        const auto r = run({"nsenter", "-t", pid, "-m", "mount", "-t", "tmpfs", "tmpfs", hidden.string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
      }
      ++masked;
    }
    ASSERT_EQ(masked, static_cast<std::size_t>(count));
  }

  std::string site_;
};

std::vector<std::string> with(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

TEST_F(node_python, run_sees_the_workstation_environment_eagerly_and_lazily) {
  const auto here = local_probe();
  // The shapes are what the test says they are: on the workstation the standard library's colorsys wins,
  // the finder's package and the .pth's import are there, the namespace package has its two halves.
  EXPECT_TRUE(contains(here, "module colorsys /usr/lib/python3.11/colorsys.py\n")) << here;
  EXPECT_TRUE(contains(here, fmt::format("module flatlib {}/flatlib/__init__.py\n", flatlib().string()))) << here;
  EXPECT_TRUE(contains(here, "module pthmark ")) << here;
  EXPECT_TRUE(contains(here, "module __editable___flatlib_1_2_finder ")) << here;
  EXPECT_TRUE(contains(here, fmt::format("nspath nspkg {}/nspkg\n", project().string()))) << here;
  EXPECT_TRUE(contains(here, "dist flatlib 1.2\n")) << here;
  EXPECT_TRUE(contains(here, "module nsp.sub ")) << here;
  EXPECT_TRUE(contains(here, "entry console_scripts flat-cli flatlib:main\n")) << here;
  EXPECT_TRUE(contains(here, "read flatlib:data.txt flat data | flat data\n")) << here;

  ASSERT_NO_FATAL_FAILURE(nodes_up(1));
  const auto o = env();
  const auto lazy = run_ferry(with({"run", "--", "python3"}, probe_args()), o);
  ASSERT_EQ(lazy.exit_code, 0) << lazy.err;
  EXPECT_TRUE(contains(lazy.err, "(lazy start)")) << lazy.err;
  EXPECT_EQ(lazy.out, here);

  // The hook's own imports (its socket to the node program, under lazy start) are gone before the program.
  const std::string own = "import sys; print([m for m in ('_socket', 'socket', 'json', 'threading') if m in sys.modules])";
  const auto local_own = run({python().string(), "-c", own}, process_options{.cwd = project()});
  const auto lazy_own = run_ferry({"run", "--", "python3", "-c", own}, o);
  ASSERT_EQ(lazy_own.exit_code, 0) << lazy_own.err;
  EXPECT_TRUE(contains(lazy_own.err, "(lazy start)")) << lazy_own.err;
  EXPECT_EQ(lazy_own.out, local_own.out);

  std::string line = "python3";
  for (const auto& a : probe_args()) line += " " + a;
  const auto eager = run_ferry({"run", "--", "sh", "-c", line}, o);
  ASSERT_EQ(eager.exit_code, 0) << eager.err;
  EXPECT_FALSE(contains(eager.err, "(lazy start)")) << eager.err;
  EXPECT_EQ(eager.out, here);
}

TEST_F(node_python, a_run_from_a_subdirectory_sees_what_python_sees_there) {
  // ferry in project/tools: that directory is the workspace, its ferry.toml names the venv above it. The
  // editable src layout's directory and the editable project beside lie outside the workspace and ship
  // as directories of their own.
  const auto tools = project() / "tools";
  write_file(tools / "env_probe.py", read_file(project() / "env_probe.py"));
  write_file(tools / "ferry.toml", "[packaging]\npython = \"../.venv/bin/python\"\n");
  const std::vector<std::string> args = {"env_probe.py", "flatlib", "wslib", "nsp.sub", "colorsys", "--read",
                                         "flatlib:data.txt", "--read", "wslib:data.txt"};
  const auto here = run(with({python().string()}, args), process_options{.cwd = tools});
  ASSERT_EQ(here.exit_code, 0) << here.err;
  EXPECT_TRUE(contains(here.out, fmt::format("path 00 {}\n", tools.string()))) << here.out;
  EXPECT_TRUE(contains(here.out, fmt::format("module wslib {}/src/wslib/__init__.py\n", project().string())))
      << here.out;
  ASSERT_NO_FATAL_FAILURE(nodes_up(1));
  auto o = env();
  o.cwd = tools;
  const auto there = run_ferry(with({"run", "--", "python3"}, args), o);
  ASSERT_EQ(there.exit_code, 0) << there.err;
  EXPECT_EQ(there.out, here.out);
}

TEST_F(node_python, every_map_task_sees_the_workstation_environment) {
  const auto here = local_probe();
  ASSERT_NO_FATAL_FAILURE(nodes_up(2));
  const auto out_dir = home_ / "results";
  const auto r = run_ferry(with({"map", "--range", "1..4", "--nodes", "2", "--output", out_dir.string(), "--",
                                 "python3"},
                                with(probe_args(), {"--task", "{}"})),
                           env());
  ASSERT_EQ(r.exit_code, 0) << r.err << read_file(out_dir / "0.err");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(read_file(out_dir / fmt::format("{}.out", i)), here) << "task " << i;
}

TEST_F(node_python, a_node_python_of_another_version_is_refused_and_another_patch_level_warned) {
  write_file(project() / "main.py", "open('ran', 'w').write('yes')\nprint('ran')\n");
  write_python_saying(home_ / "py310" / "python3", "3, 10, 12");
  write_python_saying(home_ / "py311" / "python3", "3, 11, 99");
  ASSERT_NO_FATAL_FAILURE(nodes_up(1));
  const auto o = env();
  const auto refused = run_ferry({"run", "--", (home_ / "py310" / "python3").string(), "main.py"}, o);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_EQ(refused.out, "");  // the command never ran
  for (const auto* part : {"3.10.12", "3.11.2", "packaging.python"})
    EXPECT_TRUE(contains(refused.err, part)) << part << " in " << refused.err;

  const auto warned = run_ferry({"run", "--", (home_ / "py311" / "python3").string(), "main.py"}, o);
  EXPECT_EQ(warned.exit_code, 0) << warned.err;
  EXPECT_EQ(warned.out, "ran\n");
  EXPECT_TRUE(contains(warned.err, "ferry: warning: local-")) << warned.err;
  EXPECT_TRUE(contains(warned.err, "is Python 3.11.99; the environment was packed with 3.11.2")) << warned.err;

  // The interpreter the tests pin (the venv's, Debian's python3 on the node too) says nothing.
  const auto same = run_ferry({"run", "--", "python3", "main.py"}, o);
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_FALSE(contains(same.err, "warning")) << same.err;
}

}  // namespace
}  // namespace ferry::test
