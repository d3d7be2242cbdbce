// The moto_server fixture itself: that signature checking really is on when asked for, that presigned
// GETs work with it off, and that every server gets its own port and goes away with the fixture.
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ferry::test {
namespace {

bool accepts_connections(const std::string& host, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  const bool connected = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return connected;
}

process_options with_env(std::map<std::string, std::string> env) {
  process_options options;
  options.env = std::move(env);
  return options;
}

TEST(moto_fixture, auth_on_accepts_the_fixture_key_and_rejects_a_wrong_secret) {
  moto_server moto({.auth = true});
  temp_dir dir;
  const auto file = dir.write("payload.txt", "signed payload\n");

  auto r = moto.aws({"s3", "mb", "s3://ferry-auth"});
  ASSERT_EQ(r.exit_code, 0) << r.err << "\n" << moto.log();
  r = moto.aws({"s3", "cp", file.string(), "s3://ferry-auth/dir/payload.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = moto.aws({"s3", "cp", "s3://ferry-auth/dir/payload.txt", "-"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "signed payload\n");

  r = moto.aws({"s3", "cp", file.string(), "s3://ferry-auth/other.txt"},
               with_env({{"AWS_SECRET_ACCESS_KEY", moto.secret_access_key() + "x"}}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("SignatureDoesNotMatch"), std::string::npos) << r.err;

  r = moto.aws({"s3api", "head-bucket", "--bucket", "ferry-auth"}, with_env({{"AWS_ACCESS_KEY_ID", "AKIDUNKNOWN"}}));
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find("403"), std::string::npos) << r.err;
}

TEST(moto_fixture, auth_on_policy_allows_ec2) {
  moto_server moto({.auth = true});
  const auto r = moto.aws({"ec2", "describe-vpcs", "--query", "Vpcs[0].VpcId", "--output", "text"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("vpc-", 0), 0u) << r.out;
}

TEST(moto_fixture, environment_shuts_out_the_machines_aws_files) {
  moto_server moto;
  moto.make_bucket("ferry-env");
  temp_dir home;
  home.write(".aws/config", "[default]\nendpoint_url = http://127.0.0.1:9\nregion = eu-west-3\n");
  home.write(".aws/credentials", "[default]\naws_access_key_id = AKIDHOME\naws_secret_access_key = home\n");
  auto options = moto.process_env();
  options.env["HOME"] = home.path().string();
  // The aws CLI without the fixture's --endpoint-url: AWS_ENDPOINT_URL alone must lead it to moto.
  const auto r = run({"aws", "s3api", "list-buckets", "--query", "Buckets[].Name", "--output", "text"}, options);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ferry-env"), std::string::npos) << r.out;
  EXPECT_EQ(moto.environment().at("AWS_ENDPOINT_URL"), moto.endpoint());
  EXPECT_EQ(read_file(moto.environment().at("AWS_CONFIG_FILE")), "");
}

TEST(moto_fixture, auth_off_serves_presigned_gets) {
  moto_server moto;
  temp_dir dir;
  const auto file = dir.write("object.bin", "presigned body");
  moto.make_bucket("ferry-presign");
  ASSERT_EQ(moto.aws({"s3", "cp", file.string(), "s3://ferry-presign/a/object.bin"}).exit_code, 0);

  auto r = moto.aws({"s3", "presign", "s3://ferry-presign/a/object.bin", "--expires-in", "600"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto url = r.out.substr(0, r.out.find_last_not_of("\r\n") + 1);
  ASSERT_EQ(url.rfind(moto.endpoint() + "/", 0), 0u) << url;

  r = run({"curl", "-sS", "--fail", url});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "presigned body");
}

TEST(moto_fixture, servers_get_their_own_ports_and_die_with_the_fixture) {
  std::uint16_t first_port = 0;
  {
    moto_server first;
    moto_server second({.host = "127.0.0.2"});
    first_port = first.port();
    EXPECT_EQ(first.endpoint(), "http://127.0.0.1:" + std::to_string(first.port()));
    EXPECT_EQ(second.endpoint(), "http://127.0.0.2:" + std::to_string(second.port()));
    EXPECT_TRUE(accepts_connections("127.0.0.1", first.port()));
    EXPECT_FALSE(accepts_connections("127.0.0.1", second.port()));  // bound to 127.0.0.2 only
    second.make_bucket("on-second");
    const auto r = first.aws({"s3api", "head-bucket", "--bucket", "on-second"});
    EXPECT_NE(r.exit_code, 0) << "the two servers share state";
  }
  EXPECT_FALSE(accepts_connections("127.0.0.1", first_port));
}

}  // namespace
}  // namespace ferry::test
