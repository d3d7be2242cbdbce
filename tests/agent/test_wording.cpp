// How ferry words what it prints: a count with its noun, and durations in the JSON it prints for programs.
#include "agent/cli/json_output.hpp"
#include "agent/cli/plural.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

namespace ferry::agent {
namespace {

namespace json = boost::json;

TEST(wording, a_count_of_one_takes_the_singular) {
  EXPECT_EQ(counted(1, "layer"), "1 layer");
  EXPECT_EQ(counted(0, "layer"), "0 layers");
  EXPECT_EQ(counted(97, "layer"), "97 layers");
  EXPECT_EQ(counted(1, "node is", "nodes are"), "1 node is");
  EXPECT_EQ(counted(3, "node is", "nodes are"), "3 nodes are");
}

TEST(json_output, seconds_are_plain_decimals_to_the_millisecond) {
  const json::object line{{"task", 3}, {"seconds", json_seconds(0.205328945)}, {"ok", true}};
  EXPECT_EQ(json_line(line), R"({"task":3,"seconds":0.205,"ok":true})");
  EXPECT_EQ(json_line(json::object{{"seconds", json_seconds(1234.5678)}}), R"({"seconds":1234.568})");
  EXPECT_EQ(json_line(json::object{{"seconds", json_seconds(0.0004)}}), R"({"seconds":0})");
  // What json::serialize would have printed, for contrast: the form programs and people stumble on.
  EXPECT_EQ(json::serialize(json::value(0.205328945)), "2.05328945E-1");
}

TEST(json_output, the_users_output_is_never_redacted_and_strings_are_escaped) {
  // A task may print a presigned URL or have a field named like a secret: it is the user's, as it was.
  const json::object line{{"stdout", "https://b/k?X-Amz-Signature=abc\n"}, {"token", "t\"1"}};
  EXPECT_EQ(json_line(line), R"({"stdout":"https://b/k?X-Amz-Signature=abc\n","token":"t\"1"})");
  EXPECT_EQ(json::parse(json_line(line)), json::value(line));
}

}  // namespace
}  // namespace ferry::agent
