// s3:// URLs: storage.url as the loader reads it, and the URLs of a command line.
#include "config/s3_url.hpp"

#include "config/error.hpp"

#include <gtest/gtest.h>

namespace ferry::config {
namespace {

TEST(s3_url, bucket_names_follow_s3_rules_and_user_info_is_never_shown) {
  diagnostics diag;
  const auto ok = parse_s3_url("s3://my-bucket.v2/team/pre", diag);
  ASSERT_TRUE(ok) << diag.message;
  EXPECT_EQ(ok->bucket, "my-bucket.v2");
  EXPECT_EQ(ok->key, "team/pre");
  EXPECT_TRUE(parse_s3_url("s3://b12", diag)) << diag.message;
  for (const std::string_view bad : {"s3://AKIAX:STORAGEURLSECRET@bkt/pre", "s3://Upper", "s3://under_score",
                                     "s3://ab", "s3://-dash", "s3://dash-", "s3://sp ace", "s3://u@bkt"}) {
    diagnostics d;
    const auto parsed = parse_s3_url(bad, d);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error(), errc::bad_value) << bad;
    EXPECT_NE(d.message.find("not an S3 bucket name"), std::string::npos) << d.message;
  }
  diagnostics d;
  ASSERT_FALSE(parse_s3_url("s3://AKIAX:STORAGEURLSECRET@bkt/pre", d));
  EXPECT_EQ(d.message.find("STORAGEURLSECRET"), std::string::npos) << d.message;
  EXPECT_EQ(d.message.find("AKIAX"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("***@bkt"), std::string::npos) << d.message;
  diagnostics other;
  ASSERT_FALSE(parse_s3_url("https://ID:HTTPSECRET@host/b", other));
  EXPECT_EQ(other.message.find("HTTPSECRET"), std::string::npos) << other.message;
}

}  // namespace
}  // namespace ferry::config
