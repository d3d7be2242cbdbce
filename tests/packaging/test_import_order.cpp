// The names a layer offers Python (packaging/import_names.hpp), and the order of arrival runs teach
// (packaging/import_order.hpp).
#include "packaging/import_names.hpp"
#include "packaging/import_order.hpp"

#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace ferry::packaging {
namespace {

layer layer_of(std::string name, std::vector<std::string> paths, std::uint64_t bytes = 0) {
  layer l;
  l.name = std::move(name);
  std::sort(paths.begin(), paths.end());
  for (auto& p : paths) l.files.push_back(file_entry{std::move(p)});
  l.bytes = bytes;
  return l;
}

TEST(import_names, packages_modules_extensions_and_distributions_are_read_off_the_paths) {
  const auto found = import_names_of(layer_of(
      "site", {"numpy/__init__.py", "numpy/core/x.so", "numpy-1.24.2.dist-info/RECORD", "numpy.libs/libz.so",
               "six.py", "_cffi_backend.cpython-311-x86_64-linux-gnu.so", "PyYAML-6.0.dist-info/METADATA",
               "__pycache__/six.cpython-311.pyc", "distutils-precedence.pth", "zope.interface-5.5.egg-info",
               "README.md", "nspkg/part.py", "2bad/x.py", "bad-name/x.py", "Ωmega/__init__.py", "\xff\xfe/x.py"}));
  EXPECT_EQ(found.modules,
            (std::vector<std::string>{"_cffi_backend", "nspkg", "numpy", "six", "Ωmega"}));
  EXPECT_EQ(found.dists, (std::vector<std::string>{"numpy", "pyyaml", "zope_interface"}));
  EXPECT_EQ(normalise_distribution("Foo.Bar--baz_"), "foo_bar_baz");
}

TEST(import_order, ranks_put_the_workspace_first_then_the_order_then_the_largest) {
  scan_result scan;
  scan.layers.push_back(layer_of("workspace", {"main.py"}, 10));
  scan.layers.back().root_index = 0;
  for (auto [name, bytes] : std::vector<std::pair<std::string, std::uint64_t>>{
           {"boto3", 5}, {"botocore", 900}, {"numpy", 500}, {"six", 1}}) {
    scan.layers.push_back(layer_of(name, {name + "/__init__.py"}, bytes));
    scan.layers.back().root_index = 1;
  }
  const std::vector<root_spec> roots{{"/w", root_spec::kind::workspace, 0}, {"/s", root_spec::kind::site_packages, 1}};
  // Nothing learned: the largest first.
  EXPECT_EQ(layer_ranks(scan, roots, {}), (std::vector<std::size_t>{0, 3, 1, 2, 4}));
  // six then boto3 imported first; a name no layer has is ignored.
  EXPECT_EQ(layer_ranks(scan, roots, {"six", "gone", "boto3"}), (std::vector<std::size_t>{0, 2, 3, 4, 1}));
}

TEST(import_order, this_runs_order_goes_first_and_junk_reads_as_no_order) {
  EXPECT_EQ(merge_import_order({"b", "a"}, {"a", "c", "b", "d"}), (std::vector<std::string>{"b", "a", "c", "d"}));
  EXPECT_EQ(parse_import_order(import_order_json({"x", "y"})), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(parse_import_order("not json").empty());
  EXPECT_TRUE(parse_import_order(R"({"layers": 3})").empty());
  EXPECT_EQ(parse_import_order(R"({"layers": ["a", 1, "", "a", "b"]})"), (std::vector<std::string>{"a", "b"}));
}

TEST(import_order, the_project_is_its_origin_remote_else_its_path) {
  test::temp_dir a, b;
  EXPECT_NE(project_id(a.path()), project_id(b.path()));
  EXPECT_EQ(project_id(a.path()).size(), 32u);
  for (const auto* dir : {&a, &b})
    dir->write(".git/config", "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = git@example.com:team/proj.git\n");
  EXPECT_EQ(project_id(a.path()), project_id(b.path()));  // two clones, one project
  EXPECT_EQ(import_order_key("pre/", project_id(a.path())), "pre/import-orders/" + project_id(a.path()) + ".json");
}

}  // namespace
}  // namespace ferry::packaging
