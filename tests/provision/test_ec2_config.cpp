// The [ec2] section of the configuration, and where the provider finds EC2: endpoint, region and
// credentials from [ec2] first, then the AWS way.
#include "config/error.hpp"
#include "config/loader.hpp"
#include "provision/ec2/target.hpp"

#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace ferry::provision::ec2 {
namespace {

using namespace std::chrono_literals;

struct ec2_config : ::testing::Test {
  test::temp_dir dir;
  std::map<std::string, std::string, std::less<>> env{{"HOME", dir.path().string()}};

  result<config::loaded_config> load(diagnostics& diag) {
    config::load_options o;
    o.working_dir = dir / "project";
    o.env = [this](std::string_view name) -> std::optional<std::string> {
      const auto it = env.find(name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
    return config::load(o, diag);
  }
};

TEST_F(ec2_config, defaults) {
  diagnostics diag;
  const auto c = load(diag);
  ASSERT_TRUE(c) << diag.message;
  const auto& e = c->values.ec2;
  EXPECT_EQ(e.ami, "");
  EXPECT_EQ(e.address, "private");
  EXPECT_EQ(e.architecture, "x86_64");
  EXPECT_EQ(e.catalogue_ttl, 4h);
  EXPECT_FALSE(e.spot);
  EXPECT_EQ(e.min_cpus, 2);
  EXPECT_DOUBLE_EQ(e.min_memory_gib, 4);
  EXPECT_TRUE(e.security_group_ids.empty());
  EXPECT_EQ(e.user, "root");
  EXPECT_EQ(c->origin.at("ec2.user"), "ssh.user (default)");
}

TEST_F(ec2_config, an_ec2_section_is_read_and_the_user_follows_ssh_user) {
  dir.write("project/ferry.toml",
            "[ssh]\nuser = \"admin\"\n"
            "[ec2]\nregion = \"eu-west-1\"\nami = \"ami-0abc\"\nsubnet_id = \"subnet-1\"\n"
            "security_group_ids = [\"sg-1\", \"sg-2\"]\nspot = true\nmin_cpus = 8\nmin_memory_gib = 15.5\n"
            "address = \"public\"\narchitecture = \"arm64\"\ncatalogue_ttl = \"30m\"\n");
  env["FERRY_EC2_INSTANCE_TYPE"] = "c7g.2xlarge";
  diagnostics diag;
  const auto c = load(diag);
  ASSERT_TRUE(c) << diag.message;
  const auto& e = c->values.ec2;
  EXPECT_EQ(e.region, "eu-west-1");
  EXPECT_EQ(e.ami, "ami-0abc");
  EXPECT_EQ(e.subnet_id, "subnet-1");
  EXPECT_EQ(e.security_group_ids, (std::vector<std::string>{"sg-1", "sg-2"}));
  EXPECT_TRUE(e.spot);
  EXPECT_EQ(e.min_cpus, 8);
  EXPECT_DOUBLE_EQ(e.min_memory_gib, 15.5);
  EXPECT_EQ(e.address, "public");
  EXPECT_EQ(e.architecture, "arm64");
  EXPECT_EQ(e.catalogue_ttl, 30min);
  EXPECT_EQ(e.instance_type, "c7g.2xlarge");
  EXPECT_EQ(e.user, "admin");
  EXPECT_NE(c->origin.at("ec2.user").find("ssh.user ("), std::string::npos) << c->origin.at("ec2.user");
  const auto shown = config::render(*c);
  EXPECT_NE(shown.find("ec2.min_memory_gib = 15.5"), std::string::npos) << shown;
}

TEST_F(ec2_config, an_explicit_user_wins) {
  dir.write("project/ferry.toml", "[ec2]\nuser = \"ubuntu\"\n");
  diagnostics diag;
  const auto c = load(diag);
  ASSERT_TRUE(c) << diag.message;
  EXPECT_EQ(c->values.ec2.user, "ubuntu");
}

TEST_F(ec2_config, bad_values_name_the_key) {
  for (const std::string toml : {"[ec2]\naddress = \"elastic\"\n", "[ec2]\nmin_memory_gib = -1\n",
                                 "[ec2]\nmin_memory_gib = \"lots\"\n", "[ec2]\narchitecture = \"sparc\"\n",
                                 "[ec2]\nspto = true\n"}) {
    dir.write("project/ferry.toml", toml);
    diagnostics diag;
    EXPECT_FALSE(load(diag)) << toml;
    EXPECT_NE(diag.message.find("ec2."), std::string::npos) << diag.message;
  }
}

// ---- target ---------------------------------------------------------------------------------------

net::environment vars(std::map<std::string, std::string, std::less<>> v) {
  v.emplace("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE");
  v.emplace("AWS_SECRET_ACCESS_KEY", "secret");
  v.emplace("AWS_CONFIG_FILE", "/nonexistent/config");
  v.emplace("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials");
  return net::map_environment(std::move(v));
}

TEST(ec2_target, aws_own_endpoint_for_the_region_by_default) {
  diagnostics diag;
  const auto t = resolve_target({}, vars({{"AWS_REGION", "eu-central-1"}}), diag);
  ASSERT_TRUE(t) << diag.message;
  EXPECT_EQ(t->region, "eu-central-1");
  EXPECT_EQ(t->at.origin(), "https://ec2.eu-central-1.amazonaws.com");
  EXPECT_EQ(t->creds.access_key_id, "AKIDEXAMPLE");
}

TEST(ec2_target, the_service_endpoint_variable_beats_the_general_one_and_config_beats_both) {
  diagnostics diag;
  const auto env = vars({{"AWS_ENDPOINT_URL", "http://general:1"}, {"AWS_ENDPOINT_URL_EC2", "http://ec2only:2"},
                         {"AWS_ENDPOINT_URL_S3", "http://s3only:3"}});
  auto t = resolve_target({}, env, diag);
  ASSERT_TRUE(t) << diag.message;
  EXPECT_EQ(t->at.origin(), "http://ec2only:2");
  EXPECT_EQ(t->region, "us-east-1");

  config::ec2_settings s;
  s.endpoint = "http://configured:4";
  s.region = "ap-south-1";
  t = resolve_target(s, env, diag);
  ASSERT_TRUE(t) << diag.message;
  EXPECT_EQ(t->at.origin(), "http://configured:4");
  EXPECT_EQ(t->region, "ap-south-1");
}

TEST(ec2_target, a_malformed_configured_endpoint_names_the_key) {
  diagnostics diag;
  config::ec2_settings s;
  s.endpoint = "ftp://nope";
  EXPECT_FALSE(resolve_target(s, vars({}), diag));
  EXPECT_NE(diag.message.find("ec2.endpoint"), std::string::npos) << diag.message;
}

}  // namespace
}  // namespace ferry::provision::ec2
