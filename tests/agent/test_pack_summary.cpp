// What a first pack says it ships, from a pack report made by hand: the total, the largest layers, and
// when a venv would ship less.
#include "agent/pack/pack_summary.hpp"

#include <gtest/gtest.h>

namespace ferry::agent {
namespace {

// A pack report of layers from a workspace (root 0) and a site-packages directory (root 1), each layer one
// file named for what it provides; which names the workspace imports is each test's to say.
struct fake_pack {
  std::vector<packaging::layer> layers;
  std::vector<packaging::root_spec> roots{
      {"/home/u/project", packaging::root_spec::kind::workspace, 0},
      {"/usr/lib/python3/dist-packages", packaging::root_spec::kind::site_packages, 1}};
  packaging::pack_report report;

  void add(std::string name, std::size_t root, std::string top_file, std::uint64_t bytes) {
    packaging::layer l;
    l.name = std::move(name);
    l.root_index = root;
    l.bytes = bytes;
    packaging::file_entry f;
    f.path = std::move(top_file);
    f.key.size = bytes;
    l.files.push_back(f);
    layers.push_back(std::move(l));
  }
  const packaging::pack_report& done() {
    report.layers.clear();
    for (const auto& l : layers) report.layers.push_back({&l, packaging::layer_report::state::uploaded, l.bytes});
    return report;
  }
};

TEST(pack_summary, names_the_total_and_the_largest_layers) {
  fake_pack p;
  p.add("workspace", 0, "job.py", 2048);
  p.add("yaml", 1, "yaml/__init__.py", 1 << 20);
  p.add("sympy", 1, "sympy/__init__.py", 60u << 20);
  p.add("moto", 1, "moto/__init__.py", 30u << 20);
  p.add("six", 1, "six.py", 4096);
  const auto s = summarise_shipped(p.done(), p.roots, {"yaml"}, false);
  EXPECT_EQ(s.layers, 5u);
  EXPECT_EQ(s.site_layers, 4u);
  EXPECT_EQ(s.unimported, 3u);  // sympy, moto, six
  ASSERT_EQ(s.largest.size(), 3u);
  EXPECT_EQ(s.largest[0].first, "sympy");
  EXPECT_EQ(s.largest[1].first, "moto");
  EXPECT_EQ(s.largest[2].first, "yaml");
  EXPECT_TRUE(s.advise_venv);
  const auto lines = shipped_lines(s);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "first pack of this project: 91.0 MiB in 5 layers; largest: sympy 60.0 MiB, moto 30.0 MiB, "
                      "yaml 1.0 MiB");
  EXPECT_NE(lines[1].find("3 of the 4 packages shipped from /usr/lib/python3/dist-packages (90.0 MiB) are imported "
                          "by no file of the workspace: a venv"),
            std::string::npos)
      << lines[1];
}

TEST(pack_summary, no_venv_advice_when_the_workspace_uses_most_of_it_or_runs_in_a_venv) {
  fake_pack p;
  p.add("workspace", 0, "job.py", 2048);
  p.add("numpy", 1, "numpy/__init__.py", 40u << 20);
  p.add("pandas", 1, "pandas/__init__.py", 50u << 20);
  p.add("six", 1, "six.py", 4096);
  const auto used = summarise_shipped(p.done(), p.roots, {"numpy", "pandas"}, false);
  EXPECT_EQ(used.unimported, 1u);
  EXPECT_FALSE(used.advise_venv);
  EXPECT_EQ(shipped_lines(used).size(), 1u);
  // Many unused, but they are small: most of what ships is used.
  fake_pack q;
  q.add("workspace", 0, "job.py", 2048);
  q.add("torch", 1, "torch/__init__.py", 500u << 20);
  for (const char* n : {"a", "b", "c"}) q.add(n, 1, std::string(n) + ".py", 1024);
  EXPECT_FALSE(summarise_shipped(q.done(), q.roots, {"torch"}, false).advise_venv);
  // All unused, but the interpreter is already a venv's: the advice would be no news.
  EXPECT_FALSE(summarise_shipped(p.done(), p.roots, {}, true).advise_venv);
  EXPECT_TRUE(summarise_shipped(p.done(), p.roots, {}, false).advise_venv);
}

TEST(pack_summary, only_a_pack_that_found_nothing_stored_is_a_first_pack) {
  pack_outcome o;
  o.report.uploaded_shards = 3;
  EXPECT_TRUE(first_pack(o));
  o.layers_present = 1;  // an edit: the rest was stored by an earlier pack
  EXPECT_FALSE(first_pack(o));
  o.layers_present = 0;
  o.report.manifest_present = true;
  EXPECT_FALSE(first_pack(o));
  o.report.manifest_present = false;
  o.report.uploaded_shards = 0;  // a dry run, or no storage
  EXPECT_FALSE(first_pack(o));
}

}  // namespace
}  // namespace ferry::agent
