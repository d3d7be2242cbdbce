// The names a workspace's Python files import, read without Python: what the first pack's summary
// weighs site-packages against.
#include "packaging/python_imports.hpp"

#include <gtest/gtest.h>

namespace ferry::packaging {
namespace {

using name_list = std::vector<std::string>;

TEST(python_imports, top_level_names_of_import_and_from) {
  EXPECT_EQ(imported_names("import os\nimport yaml, numpy.linalg as la\nfrom pandas.io import json\n"),
            (name_list{"numpy", "os", "pandas", "yaml"}));
  EXPECT_EQ(imported_names("def f():\n    import scipy  # lazily\n\tfrom  stats.core import mean\n"),
            (name_list{"scipy", "stats"}));
}

TEST(python_imports, relative_imports_comments_and_lookalikes_give_nothing) {
  EXPECT_EQ(imported_names("from . import sibling\nfrom .pkg import x\n# import commented\n"
                           "important = 1\nimported(x)\nfromage = 2\nimport\n"),
            name_list{});
  EXPECT_EQ(imported_names("import a # , b\nimport 3d\n"), name_list{"a"});
}

TEST(python_imports, sorted_and_unique) {
  EXPECT_EQ(imported_names("import b\nimport a\nimport b.c\nfrom a import z\n"), (name_list{"a", "b"}));
}

}  // namespace
}  // namespace ferry::packaging
