// ferry's S3 client against a real moto_server with signature checking on, with the aws CLI as the
// independent client: what one writes, the other must read byte for byte.
#include "support/eliot.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/random_bytes.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>

namespace ferry {
namespace {

using test::temp_dir;
using test::write_random_file;

class s3_moto : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    moto_ = new test::moto_server({.auth = true});
    moto_->make_bucket("ferry-test");
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }

  test::process_options env() const {
    auto o = moto_->process_env();
    o.env["HOME"] = dir.path().string();
    o.env["XDG_STATE_HOME"] = (dir / "state").string();
    o.env["XDG_CONFIG_HOME"] = (dir / "config").string();
    // Above 8 MiB, multipart: the 100 MiB round trip goes in parts, the smaller ones as one streamed PUT.
    o.env["FERRY_S3_MULTIPART_THRESHOLD"] = "8MiB";
    return o;
  }

  test::process_result ferry(const std::vector<std::string>& args) const { return test::run_ferry(args, env()); }

  static test::moto_server* moto_;
  temp_dir dir;
};

test::moto_server* s3_moto::moto_ = nullptr;

class round_trip : public s3_moto, public ::testing::WithParamInterface<std::size_t> {};

TEST_P(round_trip, ferry_and_the_aws_cli_read_each_others_objects_byte_for_byte) {
  const auto size = GetParam();
  const auto source = dir / "source";
  write_random_file(source, size, static_cast<unsigned>(size));
  const auto key = "s3://ferry-test/round-trip/" + std::to_string(size);
  const auto trace = dir / "up.jsonl";

  auto up = ferry({"storage", "cp", source.string(), key, "--trace", trace.string()});
  ASSERT_EQ(up.exit_code, 0) << up.err << moto_->log();
  EXPECT_TRUE(test::eliot_parse({trace})[0].at("complete").as_bool());

  auto by_aws = moto_->aws({"s3", "cp", key, (dir / "by-aws").string()});
  ASSERT_EQ(by_aws.exit_code, 0) << by_aws.err;
  EXPECT_EQ(test::read_file(dir / "by-aws"), test::read_file(source));

  auto down = ferry({"storage", "cp", key, (dir / "by-ferry").string()});
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(test::read_file(dir / "by-ferry"), test::read_file(source));

  const auto aws_key = key + "-by-aws";
  ASSERT_EQ(moto_->aws({"s3", "cp", source.string(), aws_key}).exit_code, 0);
  auto aws_down = ferry({"storage", "cp", aws_key, (dir / "aws-by-ferry").string()});
  ASSERT_EQ(aws_down.exit_code, 0) << aws_down.err;
  EXPECT_EQ(test::read_file(dir / "aws-by-ferry"), test::read_file(source));
}

INSTANTIATE_TEST_SUITE_P(sizes, round_trip,
                         ::testing::Values(0u, 1u, (5u << 20) + 1, 100u << 20),
                         [](const auto& p) { return std::to_string(p.param) + "_bytes"; });

TEST_F(s3_moto, a_large_file_below_the_threshold_streams_in_one_put_with_its_checksum_trailer) {
  const auto source = dir / "streamed";
  write_random_file(source, 40u << 20, 11);
  auto o = env();
  o.env["FERRY_S3_MULTIPART_THRESHOLD"] = "1GiB";
  const auto trace = dir / "t.jsonl";
  auto up = test::run_ferry({"storage", "cp", source.string(), "s3://ferry-test/streamed", "--trace", trace.string()}, o);
  ASSERT_EQ(up.exit_code, 0) << up.err;
  EXPECT_EQ(test::read_file(trace).find(action_types::s3::multipart_upload), std::string::npos);
  ASSERT_EQ(moto_->aws({"s3", "cp", "s3://ferry-test/streamed", (dir / "back").string()}).exit_code, 0);
  EXPECT_EQ(test::read_file(dir / "back"), test::read_file(source));
}

TEST_F(s3_moto, multipart_uploads_leave_no_parts_behind) {
  const auto source = dir / "big";
  write_random_file(source, 20u << 20, 7);
  ASSERT_EQ(ferry({"storage", "cp", source.string(), "s3://ferry-test/multi/big"}).exit_code, 0);
  // No --prefix: moto 5.2.1 rejects the signature of a query value holding '/' while checking is on.
  const auto uploads = moto_->aws({"s3api", "list-multipart-uploads", "--bucket", "ferry-test"});
  ASSERT_EQ(uploads.exit_code, 0) << uploads.err;
  EXPECT_EQ(uploads.out.find("UploadId"), std::string::npos) << uploads.out;
}

TEST_F(s3_moto, a_wrong_secret_fails_with_a_clear_message_and_exit_1) {
  dir.write("f", "hello");
  auto o = env();
  o.env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret";
  const auto r = test::run_ferry({"storage", "cp", (dir / "f").string(), "s3://ferry-test/wrong-secret"}, o);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("secret"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not-the-secret"), std::string::npos) << "the secret itself must never be printed";
  EXPECT_NE(moto_->aws({"s3api", "head-object", "--bucket", "ferry-test", "--key", "wrong-secret"}).exit_code, 0);
}

TEST_F(s3_moto, a_missing_bucket_is_named) {
  dir.write("f", "hello");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"storage", "cp", (dir / "f").string(), "s3://no-such-bucket-here/k"},
           {"storage", "ls", "s3://no-such-bucket-here/"},
           {"storage", "cp", "s3://no-such-bucket-here/k", (dir / "g").string()}}) {
    const auto r = ferry(args);
    EXPECT_EQ(r.exit_code, 1) << args[1];
    EXPECT_NE(r.err.find("no-such-bucket-here"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "g"));
}

TEST_F(s3_moto, a_missing_key_is_named_and_no_file_is_left_behind) {
  const auto r = ferry({"storage", "cp", "s3://ferry-test/no/such/key", (dir / "out").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no/such/key"), std::string::npos) << r.err;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find("out"), std::string::npos) << entry.path();
}

// With moto's signature checking off: it cannot verify a query value holding '/' (listing a prefix), and
// it answers presigned GETs only while checking is off.
class s3_moto_open : public ::testing::Test {
 protected:
  void SetUp() override {
    moto.make_bucket("ferry-test");
    o = moto.process_env();
    o.env["HOME"] = dir.path().string();
    o.env["XDG_STATE_HOME"] = (dir / "state").string();
  }
  test::process_result ferry(const std::vector<std::string>& args) const { return test::run_ferry(args, o); }

  temp_dir dir;
  test::moto_server moto;
  test::process_options o;
};

TEST_F(s3_moto_open, ls_and_rm) {
  dir.write("f", "x");
  for (const char* k : {"lsrm/a", "lsrm/b", "lsrm/sub/c"})
    ASSERT_EQ(ferry({"storage", "cp", (dir / "f").string(), std::string("s3://ferry-test/") + k}).exit_code, 0);
  auto ls = ferry({"storage", "ls", "s3://ferry-test/lsrm/"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("s3://ferry-test/lsrm/a\n"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("s3://ferry-test/lsrm/sub/c\n"), std::string::npos) << ls.out;

  EXPECT_EQ(ferry({"storage", "rm", "s3://ferry-test/lsrm/a"}).exit_code, 0);
  EXPECT_EQ(ferry({"storage", "rm", "s3://ferry-test/lsrm/a"}).exit_code, 1);  // gone: named, not silently fine
  EXPECT_EQ(ferry({"storage", "rm", "-r", "s3://ferry-test/lsrm/"}).exit_code, 0);
  ls = ferry({"storage", "ls", "s3://ferry-test/lsrm/"});
  EXPECT_EQ(ls.out, "");
}

TEST_F(s3_moto_open, a_bucket_or_a_prefix_where_an_object_is_meant_is_a_usage_error_that_changes_nothing) {
  dir.write("f", "kept");
  ASSERT_EQ(ferry({"storage", "cp", (dir / "f").string(), "s3://ferry-test/kept/f"}).exit_code, 0);
  const auto out = (dir / "x").string();
  struct refused {
    std::vector<std::string> args;
    std::string named;  // what the message must name
  };
  const std::vector<refused> cases = {
      {{"storage", "cp", "s3://ferry-test", out}, "names a bucket"},
      {{"storage", "cp", "s3://ferry-test/", out}, "names a bucket"},
      {{"storage", "cp", "s3://ferry-test/kept/", out}, "names a prefix"},
      {{"storage", "rm", "s3://ferry-test/"}, "-r deletes everything under a prefix"},
      {{"storage", "rm", "s3://ferry-test/kept/"}, "names a prefix"},
      {{"storage", "presign", "s3://ferry-test"}, "names a bucket"},
      {{"storage", "cp", "s3://", out}, "names no bucket"},
      {{"storage", "cp", "s3:///kept/f", out}, "names no bucket"},
      {{"storage", "ls", "not-a-url"}, "'not-a-url' is not an s3:// URL"},
      {{"storage", "cp", dir.path().string(), "s3://ferry-test/kept/"}, "is a directory"},
  };
  for (const auto& c : cases) {
    const auto r = ferry(c.args);
    EXPECT_EQ(r.exit_code, 2) << fmt::format("{}: {}", fmt::join(c.args, " "), r.err);
    EXPECT_NE(r.err.find(c.named), std::string::npos) << fmt::format("{}: {}", fmt::join(c.args, " "), r.err);
    EXPECT_FALSE(std::filesystem::exists(out)) << fmt::format("{} wrote {}", fmt::join(c.args, " "), out);
  }
  const auto ls = ferry({"storage", "ls", "s3://ferry-test/kept/"});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("s3://ferry-test/kept/f\n"), std::string::npos) << "a refused rm deleted something";
}

TEST_F(s3_moto_open, presigned_urls_fetch_the_object_with_curl_and_name_the_node_endpoint) {
  dir.write("f", "presigned bytes\n");
  ASSERT_EQ(ferry({"storage", "cp", (dir / "f").string(), "s3://ferry-test/p/f"}).exit_code, 0);

  const auto url = ferry({"storage", "presign", "s3://ferry-test/p/f", "--expires", "10m"});
  ASSERT_EQ(url.exit_code, 0) << url.err;
  EXPECT_NE(url.out.find("X-Amz-Expires=600"), std::string::npos) << url.out;
  const auto got = test::run({"curl", "-sSf", url.out.substr(0, url.out.size() - 1)});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  EXPECT_EQ(got.out, "presigned bytes\n");

  o.env["FERRY_STORAGE_NODE_ENDPOINT"] = "http://10.200.0.1:" + std::to_string(moto.port());
  const auto for_nodes = ferry({"storage", "presign", "--for-nodes", "s3://ferry-test/p/f"});
  ASSERT_EQ(for_nodes.exit_code, 0) << for_nodes.err;
  EXPECT_EQ(for_nodes.out.rfind("http://10.200.0.1:" + std::to_string(moto.port()) + "/ferry-test/p/f?", 0), 0u)
      << for_nodes.out;
  EXPECT_EQ(ferry({"storage", "presign", "s3://ferry-test/p/f", "--expires", "8d"}).exit_code, 2);
}

}  // namespace
}  // namespace ferry
