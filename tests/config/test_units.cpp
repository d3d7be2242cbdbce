#include "config/units.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>

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

TEST(units, values_that_are_not_finite_or_too_large_are_refused) {
  for (const auto* text : {"inf", "nan", "infs", "1e300", "1e300ms", "36501d", "-0.5s"})
    EXPECT_FALSE(parse_duration(text)) << text;
  EXPECT_EQ(parse_duration("36500d"), max_duration);
  for (double seconds : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(), 1e300,
                         -1.0})
    EXPECT_FALSE(duration_of_seconds(seconds)) << seconds;
  EXPECT_EQ(duration_of_seconds(1.5), duration(1'500));
  for (const auto* text : {"inf", "nan", "1e300", "2EiB", "2000000TiB"}) EXPECT_FALSE(parse_byte_size(text)) << text;
  EXPECT_EQ(quoted_value("short"), "'short'");
  const auto shown = quoted_value(std::string(10 << 20, 'x'));
  EXPECT_LT(shown.size(), 100u);
  EXPECT_NE(shown.find("10485760 bytes"), std::string::npos) << shown;
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
