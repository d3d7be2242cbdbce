#include "tracing/task_id.hpp"

#include <gtest/gtest.h>

#include <set>

namespace ferry::tracing {
namespace {

TEST(task_id, new_uuids_are_version_4_and_distinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const auto id = new_task_uuid();
    const std::string text(id.view());
    EXPECT_EQ(text.size(), 36u);
    EXPECT_EQ(text[14], '4');
    EXPECT_NE(std::string("89ab").find(text[19]), std::string::npos);
    seen.insert(text);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(task_id, serialises_as_eliot_does) {
  diagnostics diag;
  auto id = parse_task_id("7c41b0a8-9a4a-4dd6-9a5b-6e0c8f3e2d10@/1/2/3", diag);
  ASSERT_TRUE(id) << diag.message;
  EXPECT_EQ(serialize_task_id(id->uuid, id->level), "7c41b0a8-9a4a-4dd6-9a5b-6e0c8f3e2d10@/1/2/3");
  EXPECT_EQ(id->level.size(), 3u);
}

TEST(task_id, rejects_malformed_ids_with_a_reason) {
  for (const char* bad : {"", "nouuid", "7c41b0a8-9a4a-4dd6-9a5b-6e0c8f3e2d10", "7c41b0a8@/1",
                          "7c41b0a8-9a4a-4dd6-9a5b-6e0c8f3e2d10@", "7c41b0a8-9a4a-4dd6-9a5b-6e0c8f3e2d10@/0",
                          "7c41b0a8-9a4a-4dd6-9a5b-6e0c8f3e2d10@/1//2", "7c41b0a8-9a4a-4dd6-9a5b-6e0c8f3e2d10@/x"}) {
    diagnostics diag;
    EXPECT_FALSE(parse_task_id(bad, diag)) << bad;
    EXPECT_NE(diag.message.find("task id"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace ferry::tracing
