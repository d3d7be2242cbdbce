// The site plan (sans-io): from a scripted interpreter's answer, classified as discovery does, and layers as
// the scan makes them, how the node's sys.path, .pth lines and directories are to be laid out.
#include "packaging/discovery.hpp"
#include "packaging/site_plan.hpp"

#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <filesystem>

namespace ferry::packaging {
namespace {

namespace fs = std::filesystem;
using slot = site_slot::kind;

class site_plan_of : public ::testing::Test {
 protected:
  site_plan_of() {
    fs::create_directories(ws / "src");
    fs::create_directories(site);
    fs::create_directories(base / "lib/python3.11/lib-dynload");
    fs::create_directories(beside / "flatlib");
    answer.base_prefix = answer.prefix = base.string();
    answer.stdlib = answer.platstdlib = (base / "lib/python3.11").string();
    answer.site_packages = {site.string()};
    answer.purelib = answer.platlib = site.string();
    answer.cwd = ws.string();
  }

  // Roots as the agent makes them (every shipped entry, in order), two layers for site-packages.
  site_plan plan(bool ship_site_packages = true) {
    diagnostics diag;
    auto d = classify(answer, ws, ship_site_packages, diag);
    EXPECT_TRUE(d) << diag.message;
    found = *d;
    roots.clear();
    layers.clear();
    for (const auto* e : found.shipped()) {
      root_spec r{e->path, root_spec::kind::other, roots.size()};
      if (e->what == discovery_entry::kind::site_packages) {
        r.type = root_spec::kind::site_packages;
        layers.push_back(layer_with(r.index, "alpha", {"alpha/__init__.py", "alpha.pth"}));
        layers.push_back(layer_with(r.index, "beta", {"beta/__init__.py", "zz.pth"}));
      } else {
        layers.push_back(layer_with(r.index, e->path.filename().string(), {"x.py"}));
      }
      roots.push_back(r);
    }
    return plan_site(found, roots, layers);
  }

  static layer layer_with(std::size_t root, std::string name, std::vector<std::string> paths) {
    layer l;
    l.name = std::move(name);
    l.root_index = root;
    for (auto& p : paths) l.files.push_back(file_entry{.path = std::move(p)});
    return l;
  }

  std::vector<std::string> stdlib_entries() const {
    return {(base / "lib/python311.zip").string(), (base / "lib/python3.11").string(),
            (base / "lib/python3.11/lib-dynload").string()};
  }

  test::temp_dir dir;
  fs::path ws = dir / "ws";
  fs::path base = dir / "base";
  fs::path site = dir / "ws/.venv/lib/python3.11/site-packages";
  fs::path beside = dir / "beside";
  probe_answer answer;
  discovery found;
  std::vector<root_spec> roots;
  std::vector<layer> layers;
};

TEST_F(site_plan_of, the_local_sys_path_entry_for_entry_with_the_stdlib_where_it_stood) {
  // PYTHONPATH named the workspace and its src; '' is the script's place, which Python fills on the node.
  answer.sys_path = {"", ws.string(), (ws / "src").string()};
  for (const auto& e : stdlib_entries()) answer.sys_path.push_back(e);
  answer.sys_path.push_back(site.string());
  answer.sys_path.push_back("__editable__.flatlib-1.2.finder.__path_hook__");
  const auto p = plan();
  ASSERT_EQ(p.path.size(), 7u);
  EXPECT_EQ(p.path[0].what, slot::layers);  // the workspace, once, where PYTHONPATH put it
  EXPECT_EQ(p.path[0].layers, (std::vector<std::size_t>{0}));
  EXPECT_EQ(p.path[1].what, slot::layers);  // src, inside the workspace, a layer of its own
  EXPECT_EQ(p.path[1].layers, (std::vector<std::size_t>{1}));
  for (std::size_t i = 2; i < 5; ++i) EXPECT_EQ(p.path[i].what, slot::stdlib) << i;
  EXPECT_EQ(p.path[5].what, slot::layers);  // site-packages: every distribution's layer
  EXPECT_EQ(p.path[5].layers, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(p.path[6].what, slot::raw);
  EXPECT_EQ(p.path[6].raw, "__editable__.flatlib-1.2.finder.__path_hook__");
  EXPECT_TRUE(p.hide_node_site);
}

TEST_F(site_plan_of, pth_imports_run_in_the_local_order_from_the_layer_that_holds_each_file) {
  answer.sys_path = {""};
  for (const auto& e : stdlib_entries()) answer.sys_path.push_back(e);
  answer.sys_path.push_back(site.string());
  answer.pth = {{site.string(), "alpha.pth", {"import alpha\n", "import os; os.environ['A'] = '1'\n"}},
                {site.string(), "nobody.pth", {"import gone\n"}},
                {site.string(), "zz.pth", {"import beta\n"}}};
  const auto p = plan();
  ASSERT_EQ(p.imports.size(), 3u);
  EXPECT_EQ(p.imports[0], (site_import{1, "alpha.pth", "import alpha\n"}));
  EXPECT_EQ(p.imports[1].line, "import os; os.environ['A'] = '1'\n");
  EXPECT_EQ(p.imports[2], (site_import{2, "zz.pth", "import beta\n"}));
  ASSERT_EQ(p.warnings.size(), 1u);  // a file no layer holds is said, not run
  EXPECT_NE(p.warnings[0].find("nobody.pth"), std::string::npos) << p.warnings[0];
}

TEST_F(site_plan_of, an_editable_target_off_the_path_ships_and_is_mapped) {
  answer.sys_path = {""};
  for (const auto& e : stdlib_entries()) answer.sys_path.push_back(e);
  answer.sys_path.push_back(site.string());
  // One target inside the workspace (no layer of its own), one beside it, one placeholder.
  answer.editable = {(ws / "src").string(), (beside / "flatlib").string(), "__editable__.x.__path_hook__"};
  const auto p = plan();
  const auto& last = found.entries.back();
  EXPECT_TRUE(last.off_path);
  EXPECT_EQ(last.real_path, fs::weakly_canonical(beside / "flatlib"));
  EXPECT_EQ(found.sys_path.size(), 4u);  // not on the path
  bool mapped = false;
  for (const auto& d : p.dirs) mapped = mapped || d.local == (beside / "flatlib").string();
  EXPECT_TRUE(mapped);
  EXPECT_EQ(p.dirs.front().local, ws.string());  // the workspace maps to its layer
  EXPECT_EQ(p.dirs.front().layer, 0u);
}

TEST_F(site_plan_of, site_packages_left_to_the_node_are_the_nodes_own) {
  answer.sys_path = {""};
  for (const auto& e : stdlib_entries()) answer.sys_path.push_back(e);
  answer.sys_path.push_back(site.string());
  answer.pth = {{site.string(), "alpha.pth", {"import alpha\n"}}};
  const auto p = plan(false);
  ASSERT_EQ(p.path.size(), 4u);
  EXPECT_EQ(p.path[3].what, slot::node_site);
  EXPECT_FALSE(p.hide_node_site);
  EXPECT_TRUE(p.imports.empty());  // the node's site runs its own .pth files
  EXPECT_TRUE(p.warnings.empty());
}

}  // namespace
}  // namespace ferry::packaging
