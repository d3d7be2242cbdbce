// The node's interpreter against the packing one (agent/run/python_check.hpp), sans-io: the check's program
// run by this machine's real interpreters, its answer parsed, and the verdicts for every kind of difference.
#include "agent/run/python_check.hpp"

#include "support/process.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ferry::agent {
namespace {

packaging::python_info packed() {
  packaging::python_info p{"3.11.2", "cp311-linux_x86_64", "/usr/bin/python3"};
  p.implementation = "cpython";
  p.machine = "x86_64";
  p.abi = "cpython-311-x86_64-linux-gnu";
  return p;
}

node_python node(std::string version = "3.11.2") {
  return {"cpython", std::move(version), "x86_64", "cp311-linux_x86_64", "2.36"};
}

TEST(python_check, the_program_answers_for_this_machines_interpreters) {
  for (const auto* python : {"/usr/bin/python3", "python3"}) {
    const auto r = test::run({python, "-S", "-c", std::string(node_python_script())});
    ASSERT_EQ(r.exit_code, 0) << python << ": " << r.err;
    node_python got;
    std::string why;
    ASSERT_TRUE(parse_node_python(r.out, got, why)) << why << "\n" << r.out;
    EXPECT_EQ(got.implementation, "cpython");
    EXPECT_TRUE(got.version.starts_with("3.")) << got.version;
    EXPECT_EQ(got.platform, "cp311-linux_x86_64");
    EXPECT_FALSE(got.glibc.empty());
  }
  node_python got;
  std::string why;
  EXPECT_FALSE(parse_node_python("Python 3.11\n", got, why));
  EXPECT_FALSE(parse_node_python("FERRY-PYTHON cpython 3.11.2\n", got, why));
  EXPECT_NE(why.find("five words"), std::string::npos) << why;
}

TEST(python_check, the_same_interpreter_fits_and_another_patch_level_warns) {
  EXPECT_EQ(compare_python(packed(), node(), "node-1's python3", {}).what, python_verdict::kind::fits);
  const auto v = compare_python(packed(), node("3.11.7"), "node-1's python3", {});
  EXPECT_EQ(v.what, python_verdict::kind::warn);
  EXPECT_NE(v.text.find("3.11.7"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("3.11.2"), std::string::npos) << v.text;
}

TEST(python_check, another_minor_version_is_refused_naming_both_and_the_compiled_packages) {
  auto n = node("3.10.12");
  n.platform = "cp310-linux_x86_64";
  const auto v = compare_python(packed(), n, "node-1's python3", {"numpy", "pandas"});
  EXPECT_EQ(v.what, python_verdict::kind::refuse);
  for (const auto* part : {"node-1's python3", "3.10.12", "3.11.2", "numpy, pandas", "packaging.python"})
    EXPECT_NE(v.text.find(part), std::string::npos) << part << " in " << v.text;
}

TEST(python_check, another_implementation_machine_or_an_old_glibc_is_refused) {
  auto pypy = node();
  pypy.implementation = "pypy";
  EXPECT_EQ(compare_python(packed(), pypy, "n", {}).what, python_verdict::kind::refuse);
  auto arm = node();
  arm.machine = "aarch64";
  arm.platform = "cp311-linux_aarch64";
  const auto v = compare_python(packed(), arm, "n", {"numpy"});
  EXPECT_EQ(v.what, python_verdict::kind::refuse);
  EXPECT_NE(v.text.find("linux_aarch64"), std::string::npos) << v.text;

  auto needs = packed();
  needs.glibc = "2.38";
  needs.glibc_by = {"polars"};
  const auto old = compare_python(needs, node(), "n", {});
  EXPECT_EQ(old.what, python_verdict::kind::refuse);
  for (const auto* part : {"2.36", "2.38", "polars"}) EXPECT_NE(old.text.find(part), std::string::npos) << old.text;
  needs.glibc = "2.17";
  EXPECT_EQ(compare_python(needs, node(), "n", {}).what, python_verdict::kind::fits);
  auto musl = node();
  musl.glibc.clear();
  EXPECT_EQ(compare_python(needs, musl, "n", {}).what, python_verdict::kind::refuse);
}

TEST(python_check, the_glibc_needs_of_wheels_come_from_discovery) {
  packaging::discovery d;
  d.version = "3.11.2";
  d.entries.push_back({"/venv/site-packages", "/venv/site-packages", packaging::discovery_entry::kind::site_packages});
  d.wheel_glibc = {{"numpy", "2.17"}, {"polars", "2.28"}, {"orjson", "2.28"}, {"six", "2.5"}};
  const auto p = packaging::python_info_of(d);
  EXPECT_EQ(p.glibc, "2.28");
  EXPECT_EQ(p.glibc_by, (std::vector<std::string>{"polars", "orjson"}));
  d.entries.clear();  // site-packages left to the node: its wheels are the node's own
  EXPECT_EQ(packaging::python_info_of(d).glibc, "");
}

}  // namespace
}  // namespace ferry::agent
