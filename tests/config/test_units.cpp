#include "config/units.hpp"

#include <gtest/gtest.h>

namespace ferry::config {
namespace {

TEST(units, durations) {
  EXPECT_EQ(parse_duration("250ms"), duration(250));
  EXPECT_EQ(parse_duration("10s"), duration(10'000));
  EXPECT_EQ(parse_duration("1.5 s"), duration(1'500));
  EXPECT_EQ(parse_duration("5m"), duration(300'000));
  EXPECT_EQ(parse_duration("4h"), duration(14'400'000));
  EXPECT_EQ(parse_duration("2"), duration(2'000));
  EXPECT_FALSE(parse_duration("-1s"));
  EXPECT_FALSE(parse_duration("10 parsecs"));
  EXPECT_FALSE(parse_duration(""));
  EXPECT_EQ(format_duration(duration(300'000)), "5m");
  EXPECT_EQ(format_duration(duration(1'500)), "1500ms");
}

TEST(units, sizes) {
  EXPECT_EQ(parse_byte_size("8MiB")->bytes, 8u << 20);
  EXPECT_EQ(parse_byte_size("1GB")->bytes, 1'000'000'000u);
  EXPECT_EQ(parse_byte_size("4096")->bytes, 4096u);
  EXPECT_FALSE(parse_byte_size("8 mebibytes"));
  EXPECT_EQ(format_byte_size({128u << 20}), "128MiB");
  EXPECT_EQ(format_byte_size({1000}), "1000");
}

}  // namespace
}  // namespace ferry::config
