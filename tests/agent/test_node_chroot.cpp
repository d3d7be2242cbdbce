// The node program on an older distribution: a Debian 11 root made by debootstrap (scripts/setup.sh keeps
// one in /var/cache/ferry/debian-11), whose glibc is older than the build machine's, with no curl, unzip
// or python3 in it. ferry-node, copied in, materialises a layer from moto_server there.
#include "agent/node/plan.hpp"
#include "net/digest.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include "zip_fixture.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace ferry::agent::node {
namespace {

namespace fs = std::filesystem;

const fs::path debian_11 = "/var/cache/ferry/debian-11";

TEST(node_program, runs_on_debian_11_whose_glibc_is_older_and_which_has_no_curl_unzip_or_python3) {
  ASSERT_TRUE(fs::exists(debian_11 / "etc" / "debian_version"))
      << debian_11 << " is missing: scripts/setup.sh makes it with debootstrap";
  EXPECT_EQ(test::read_file(debian_11 / "etc" / "debian_version").substr(0, 3), "11.");
  for (const auto* tool : {"usr/bin/curl", "usr/bin/unzip", "usr/bin/python3"})
    EXPECT_FALSE(fs::exists(debian_11 / tool)) << tool;
  const auto glibc = test::run({"chroot", debian_11.string(), "/usr/bin/ldd", "--version"});
  ASSERT_EQ(glibc.exit_code, 0) << glibc.err;
  EXPECT_NE(glibc.out.find("2.31"), std::string::npos) << glibc.out;

  // A place of this test's own inside the root: the program, and the node's cache.
  const auto own = fmt::format("ferry-test-{}", ::getpid());
  const auto inside = debian_11 / "tmp" / own;
  fs::create_directories(inside);
  struct cleanup {
    fs::path p;
    ~cleanup() { fs::remove_all(p); }
  } guard{inside};
  fs::copy_file(FERRY_NODE_PROGRAM, inside / "ferry-node");
  const auto version = test::run({"chroot", debian_11.string(), "/tmp/" + own + "/ferry-node", "version"});
  ASSERT_EQ(version.exit_code, 0) << version.err;
  EXPECT_EQ(version.out, "ferry-node " FERRY_VERSION "\n");

  test::moto_options mo;
  mo.auth = false;  // presigned GETs
  test::moto_server moto(mo);
  moto.make_bucket("old");
  const std::vector<test_zip::spec_entry> entries = {{"new\nline", "n"}, {"pkg/__init__.py", "X = 11\n"}};
  const auto zip = test_zip::make_zip(entries);
  test::temp_dir dir;
  const auto file = dir.write("layer.zip", zip);
  ASSERT_EQ(moto.aws({"s3", "cp", file.string(), "s3://old/layer.zip"}).exit_code, 0);
  const auto url = moto.aws({"s3", "presign", "s3://old/layer.zip"});
  ASSERT_EQ(url.exit_code, 0) << url.err;

  environment_plan plan;
  plan.cache_dir = "/tmp/" + own + "/cache";
  plan.workspace = 0;
  plan.layers.push_back({net::hex_sha256("old-layer"), "workspace",
                         {{url.out.substr(0, url.out.find('\n')), net::hex_sha256(zip), zip.size(), 2, 9,
                           test_zip::shard_id(entries), "layer.zip"}}});
  test::process_options o;
  o.input = plan_lines(plan);
  const auto r = test::run({"chroot", debian_11.string(), "/tmp/" + own + "/ferry-node", "materialise"}, o);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto layer = inside / "cache" / "layers" / plan.layers[0].id;
  EXPECT_EQ(test::read_file(layer / "pkg" / "__init__.py"), "X = 11\n");
  EXPECT_EQ(test::read_file(layer / "new\nline"), "n");
  EXPECT_NE(r.out.find(fmt::format(R"("action_status":"succeeded","action_type":"{}")",
                                    action_types::node::materialise)),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace ferry::agent::node
