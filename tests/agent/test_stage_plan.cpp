// Staging requests and plans without a node: the --stage spec, and the order a --stage-order file gives.
#include "agent/error.hpp"
#include "agent/materialise/stage.hpp"

#include <gtest/gtest.h>

namespace ferry::agent {
namespace {

stage_plan plan_of(std::initializer_list<const char*> paths) {
  stage_plan plan;
  plan.source = "s3://b/data";
  for (const char* p : paths) plan.objects.push_back({p, std::string("https://x/") + p, 1, "e"});
  return plan;
}

std::vector<std::string> paths(const stage_plan& plan) {
  std::vector<std::string> out;
  for (const auto& o : plan.objects) out.push_back(o.path);
  return out;
}

TEST(stage_spec, bucket_prefix_and_an_absolute_node_dir) {
  diagnostics diag;
  auto spec = parse_stage_spec("s3://bucket/some/prefix=/mnt/data/", diag);
  ASSERT_TRUE(spec) << diag.message;
  EXPECT_EQ(spec->bucket, "bucket");
  EXPECT_EQ(spec->prefix, "some/prefix");
  EXPECT_EQ(spec->node_dir, "/mnt/data");
  for (const char* bad : {"s3://bucket/p", "bucket/p=/x", "s3://bucket/p=relative", "s3://bucket/p="}) {
    diagnostics d;
    auto r = parse_stage_spec(bad, d);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error(), errc::bad_stage);
    EXPECT_NE(d.message.find(bad), std::string::npos) << d.message;
  }
}

TEST(stage_order, named_objects_first_then_the_rest_in_listing_order) {
  auto plan = plan_of({"a", "b", "c", "d/e"});
  diagnostics diag;
  ASSERT_TRUE(order_stage(plan, "data/", "d/e\r\n\ndata/b\n", "order.txt", diag)) << diag.message;
  EXPECT_EQ(paths(plan), (std::vector<std::string>{"d/e", "b", "a", "c"}));
  EXPECT_EQ(plan.objects[0].url, "https://x/d/e");
}

TEST(stage_order, unknown_and_repeated_names_are_errors_with_file_and_line) {
  auto plan = plan_of({"a", "b"});
  diagnostics diag;
  auto r = order_stage(plan, "", "a\nzzz\n", "order.txt", diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(diag.message, "order.txt:2: no object zzz under s3://b/data");
  auto plan2 = plan_of({"a", "b"});
  diagnostics diag2;
  ASSERT_FALSE(order_stage(plan2, "", "b\n\nb\n", "o", diag2));
  EXPECT_EQ(diag2.message, "o:3: b is named twice");
}

}  // namespace
}  // namespace ferry::agent
