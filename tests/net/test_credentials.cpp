// Credentials, region, endpoint and addressing resolution over injected environments and temp files.
#include "net/aws_profile.hpp"
#include "net/credentials.hpp"
#include "net/endpoint.hpp"
#include "net/error.hpp"
#include "net/ini_file.hpp"
#include "tracing/shown_url.hpp"
#include "support/temp_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <ostream>
#include <type_traits>

namespace ferry::net {
namespace {

using env_map = std::map<std::string, std::string, std::less<>>;

template <class T, class = void>
struct streamable : std::false_type {};
template <class T>
struct streamable<T, std::void_t<decltype(std::declval<std::ostream&>() << std::declval<const T&>())>>
    : std::true_type {};

// The point of secret_string: neither a stream nor fmt can print a secret or the credentials holding it.
static_assert(!streamable<credentials>::value);
static_assert(!streamable<secret_string>::value);
static_assert(!fmt::is_formattable<credentials>::value);
static_assert(!fmt::is_formattable<secret_string>::value);
static_assert(!std::is_convertible_v<secret_string, std::string_view>);

constexpr std::string_view file_key_id = "AKIDFILE";
constexpr std::string_view file_secret = "file/secret+KEY";

class aws_settings : public testing::Test {
 protected:
  // HOME points at the temp dir, so ~/.aws/... are files the test writes.
  env_map env_with(env_map extra) const {
    extra.emplace("HOME", dir_.path().string());
    return extra;
  }

  void write_credentials(std::string_view text) const { dir_.write(".aws/credentials", text); }
  void write_config(std::string_view text) const { dir_.write(".aws/config", text); }

  aws_profile load(const env_map& env) const {
    diagnostics diag;
    auto profile = load_aws_profile(map_environment(env), diag);
    EXPECT_TRUE(profile) << diag.message;
    return profile ? *profile : aws_profile{};
  }

  result<credentials> resolve(const env_map& env, diagnostics& diag) const {
    const auto environment = map_environment(env);
    auto profile = load_aws_profile(environment, diag);
    if (!profile) return profile.error();
    return resolve_credentials(environment, *profile, diag);
  }

  test::temp_dir dir_;
};

// ---------------------------------------------------------------------------------------------
// Credentials

TEST_F(aws_settings, environment_keys_win_over_files) {
  write_credentials(
      fmt::format("[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n", file_key_id, file_secret));
  diagnostics diag;
  const auto found = resolve(env_with({{"AWS_ACCESS_KEY_ID", "AKIDENV"},
                                       {"AWS_SECRET_ACCESS_KEY", "env-secret"},
                                       {"AWS_SESSION_TOKEN", "env-token"}}),
                             diag);
  ASSERT_TRUE(found) << diag.message;
  EXPECT_EQ(found->access_key_id, "AKIDENV");
  EXPECT_EQ(found->secret_access_key.reveal(), "env-secret");
  EXPECT_EQ(found->session_token.reveal(), "env-token");
  EXPECT_EQ(found->source, "environment");
}

TEST_F(aws_settings, key_id_without_secret_in_environment_is_incomplete) {
  diagnostics diag;
  const auto found = resolve(env_with({{"AWS_ACCESS_KEY_ID", "AKIDENV"}}), diag);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error(), errc::incomplete_credentials);
  EXPECT_NE(diag.message.find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << diag.message;
}

TEST_F(aws_settings, empty_environment_values_count_as_unset) {
  write_credentials(
      fmt::format("[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n", file_key_id, file_secret));
  diagnostics diag;
  const auto found = resolve(env_with({{"AWS_ACCESS_KEY_ID", ""}, {"AWS_PROFILE", ""}}), diag);
  ASSERT_TRUE(found) << diag.message;
  EXPECT_EQ(found->access_key_id, file_key_id);
}

TEST_F(aws_settings, default_profile_from_home_credentials_file) {
  write_credentials(
      fmt::format("# a comment\n; another\n\n[default]\n  aws_access_key_id   =   {}  \r\n"
                  "AWS_Secret_Access_Key={}\naws_session_token = tok\n\n[other]\naws_access_key_id = AKIDOTHER\n",
                  file_key_id, file_secret));
  diagnostics diag;
  const auto found = resolve(env_with({}), diag);
  ASSERT_TRUE(found) << diag.message;
  EXPECT_EQ(found->access_key_id, file_key_id);
  EXPECT_EQ(found->secret_access_key.reveal(), file_secret);
  EXPECT_EQ(found->session_token.reveal(), "tok");
  EXPECT_EQ(found->source, fmt::format("{} [default]", (dir_.path() / ".aws" / "credentials").string()));
}

TEST_F(aws_settings, aws_profile_selects_a_section_and_files_can_move) {
  const auto credentials_file = dir_.write("elsewhere/creds.ini",
                                           "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = d\n"
                                           "[work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = w\n");
  diagnostics diag;
  const auto found =
      resolve(env_with({{"AWS_PROFILE", "work"}, {"AWS_SHARED_CREDENTIALS_FILE", credentials_file.string()}}), diag);
  ASSERT_TRUE(found) << diag.message;
  EXPECT_EQ(found->access_key_id, "AKIDWORK");
  EXPECT_EQ(found->secret_access_key.reveal(), "w");

  // AWS_DEFAULT_PROFILE is the older name; AWS_PROFILE wins over it.
  const auto older = resolve(
      env_with({{"AWS_DEFAULT_PROFILE", "work"}, {"AWS_SHARED_CREDENTIALS_FILE", credentials_file.string()}}), diag);
  ASSERT_TRUE(older) << diag.message;
  EXPECT_EQ(older->access_key_id, "AKIDWORK");
  const auto both = resolve(env_with({{"AWS_PROFILE", "default"},
                                      {"AWS_DEFAULT_PROFILE", "work"},
                                      {"AWS_SHARED_CREDENTIALS_FILE", credentials_file.string()}}),
                            diag);
  ASSERT_TRUE(both) << diag.message;
  EXPECT_EQ(both->access_key_id, "AKIDDEFAULT");
}

TEST_F(aws_settings, tilde_in_file_variables_means_home) {
  dir_.write("mine/credentials", "[default]\naws_access_key_id = AKIDTILDE\naws_secret_access_key = t\n");
  diagnostics diag;
  const auto found = resolve(env_with({{"AWS_SHARED_CREDENTIALS_FILE", "~/mine/credentials"}}), diag);
  ASSERT_TRUE(found) << diag.message;
  EXPECT_EQ(found->access_key_id, "AKIDTILDE");
}

TEST_F(aws_settings, keys_in_the_config_file_profile_section) {
  write_config(
      "[default]\nregion = eu-west-1\n"
      "[profile cfg]\naws_access_key_id = AKIDCONFIG\naws_secret_access_key = c\n"
      "[cfg]\naws_access_key_id = AKIDWRONGSECTION\naws_secret_access_key = x\n");
  diagnostics diag;
  const auto found = resolve(env_with({{"AWS_PROFILE", "cfg"}}), diag);
  ASSERT_TRUE(found) << diag.message;
  EXPECT_EQ(found->access_key_id, "AKIDCONFIG");
}

TEST_F(aws_settings, credentials_file_wins_over_config_file) {
  write_credentials("[p]\naws_access_key_id = AKIDCREDS\naws_secret_access_key = a\n");
  write_config("[profile p]\naws_access_key_id = AKIDCONFIG\naws_secret_access_key = b\n");
  diagnostics diag;
  const auto found = resolve(env_with({{"AWS_PROFILE", "p"}}), diag);
  ASSERT_TRUE(found) << diag.message;
  EXPECT_EQ(found->access_key_id, "AKIDCREDS");
}

TEST_F(aws_settings, file_key_id_without_secret_is_incomplete) {
  write_credentials("[default]\naws_access_key_id = AKIDHALF\n");
  diagnostics diag;
  const auto found = resolve(env_with({}), diag);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error(), errc::incomplete_credentials);
  EXPECT_NE(diag.message.find("credentials [default]"), std::string::npos) << diag.message;
}

TEST_F(aws_settings, nothing_anywhere_is_no_credentials) {
  diagnostics diag;
  const auto found = resolve(env_with({}), diag);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error(), errc::no_credentials);
  EXPECT_NE(diag.message.find("profile 'default'"), std::string::npos) << diag.message;

  const auto homeless = resolve({}, diag);
  ASSERT_FALSE(homeless);
  EXPECT_EQ(homeless.error(), errc::no_credentials);
}

TEST_F(aws_settings, role_profiles_say_why_they_give_no_keys) {
  write_config("[profile role]\nrole_arn = arn:aws:iam::123456789012:role/x\nsource_profile = default\n");
  diagnostics diag;
  const auto found = resolve(env_with({{"AWS_PROFILE", "role"}}), diag);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error(), errc::no_credentials);
  EXPECT_NE(diag.message.find("role_arn"), std::string::npos) << diag.message;
}

TEST_F(aws_settings, a_named_profile_must_exist) {
  write_credentials("[default]\naws_access_key_id = A\naws_secret_access_key = B\n");
  diagnostics diag;
  const auto found = resolve(env_with({{"AWS_PROFILE", "missing"}}), diag);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error(), errc::profile_not_found);
  EXPECT_NE(diag.message.find("'missing'"), std::string::npos) << diag.message;
}

TEST_F(aws_settings, malformed_line_is_reported_by_file_and_line_without_its_text) {
  write_credentials("[default]\naws_access_key_id = A\n# fine\nsecretwithoutequals\n");
  diagnostics diag;
  const auto found = resolve(env_with({}), diag);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error(), errc::bad_credentials_file);
  EXPECT_EQ(diag.message.rfind(fmt::format("{}:4: ", (dir_.path() / ".aws" / "credentials").string()), 0), 0u)
      << diag.message;
  EXPECT_EQ(diag.message.find("secretwithoutequals"), std::string::npos) << diag.message;
}

TEST_F(aws_settings, redacted_shows_the_key_id_only) {
  const credentials creds{"AKIDSHOWN", secret_string("the-secret"), secret_string("the-token"), "environment"};
  const auto text = creds.redacted();
  EXPECT_NE(text.find("AKIDSHOWN"), std::string::npos);
  EXPECT_NE(text.find("session token"), std::string::npos);
  EXPECT_EQ(text.find("the-secret"), std::string::npos);
  EXPECT_EQ(text.find("the-token"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The INI reader on its own

TEST(ini_file, sections_keys_comments_nesting_and_continuations) {
  diagnostics diag;
  const auto doc = parse_ini(
      "; leading comment\n"
      "[profile dev]  # trailing comment\n"
      "region=eu-west-1\n"
      "s3 =\n"
      "  addressing_style = path\n"
      "  # comment inside the block\n"
      "  Payload_Signing_Enabled = true\n"
      "note = first\n"
      "  second\n"
      "\n"
      "[profile dev]\n"
      "region = eu-west-2\n",
      "test.ini", diag);
  ASSERT_TRUE(doc) << diag.message;
  EXPECT_EQ(doc->get("profile dev", "region"), "eu-west-2");
  EXPECT_EQ(doc->get("profile dev", "s3.addressing_style"), "path");
  EXPECT_EQ(doc->get("profile dev", "s3.payload_signing_enabled"), "true");
  EXPECT_EQ(doc->get("profile dev", "note"), "first\nsecond");
  EXPECT_EQ(doc->get("profile dev", "missing"), std::nullopt);
  EXPECT_EQ(doc->get("nope", "region"), std::nullopt);
}

TEST(ini_file, keys_indented_alike_are_siblings) {
  diagnostics diag;
  const auto doc = parse_ini("[default]\n  aws_access_key_id = A\n  aws_secret_access_key = B\n    more\n", "t", diag);
  ASSERT_TRUE(doc) << diag.message;
  EXPECT_EQ(doc->get("default", "aws_access_key_id"), "A");
  EXPECT_EQ(doc->get("default", "aws_secret_access_key"), "B\nmore");
}

TEST(ini_file, malformed_lines_name_source_and_line) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"key = before any section\n", "x.ini:1: "},
      {"[default]\n[unclosed\n", "x.ini:2: "},
      {"[default]\n[]\n", "x.ini:2: "},
      {"[default] junk\n", "x.ini:1: "},
      {"[default]\n= no name\n", "x.ini:2: "},
      {"[default]\na = 1\n\n\njust words\n", "x.ini:5: "},
      {"[default]\ns3 =\n  not a setting\n", "x.ini:3: "},
  };
  for (const auto& [text, prefix] : cases) {
    diagnostics diag;
    const auto doc = parse_ini(text, "x.ini", diag);
    ASSERT_FALSE(doc) << text;
    EXPECT_EQ(doc.error(), errc::bad_credentials_file);
    EXPECT_EQ(diag.message.rfind(prefix, 0), 0u) << diag.message;
  }
}

TEST(ini_file, missing_file_is_empty_and_directory_is_unreadable) {
  test::temp_dir dir;
  diagnostics diag;
  const auto missing = load_ini_file(dir / "absent", diag);
  ASSERT_TRUE(missing) << diag.message;
  EXPECT_TRUE(missing->sections.empty());
  const auto directory = load_ini_file(dir.path(), diag);
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.error(), errc::unreadable_file);
}

// ---------------------------------------------------------------------------------------------
// Region

TEST_F(aws_settings, region_order) {
  write_config("[default]\nregion = from-default\n[profile p]\nregion = from-profile\n");
  EXPECT_EQ(resolve_region(map_environment({}), aws_profile{}), "us-east-1");
  EXPECT_EQ(resolve_region(map_environment(env_with({})), load(env_with({}))), "from-default");
  const auto p = env_with({{"AWS_PROFILE", "p"}});
  EXPECT_EQ(resolve_region(map_environment(p), load(p)), "from-profile");
  auto with_default = p;
  with_default["AWS_DEFAULT_REGION"] = "from-default-region";
  EXPECT_EQ(resolve_region(map_environment(with_default), load(with_default)), "from-default-region");
  auto with_region = with_default;
  with_region["AWS_REGION"] = "from-region";
  EXPECT_EQ(resolve_region(map_environment(with_region), load(with_region)), "from-region");
}

// ---------------------------------------------------------------------------------------------
// Endpoints

TEST(endpoint, parses_scheme_host_port_and_base_path) {
  diagnostics diag;
  const auto minio = parse_endpoint("HTTP://MinIO.Local:9000/base/path/", diag);
  ASSERT_TRUE(minio) << diag.message;
  EXPECT_EQ(minio->scheme, "http");
  EXPECT_EQ(minio->host, "minio.local");
  EXPECT_EQ(minio->port, 9000);
  EXPECT_EQ(minio->base_path, "/base/path");
  EXPECT_FALSE(minio->aws_owned);
  EXPECT_EQ(minio->authority(), "minio.local:9000");
  EXPECT_EQ(minio->origin(), "http://minio.local:9000");

  const auto tls = parse_endpoint("https://s3.example.com", diag);
  ASSERT_TRUE(tls) << diag.message;
  EXPECT_EQ(tls->port, 443);
  EXPECT_EQ(tls->base_path, "");
  EXPECT_EQ(tls->authority(), "s3.example.com");

  const auto explicit_default = parse_endpoint("http://h:80/", diag);
  ASSERT_TRUE(explicit_default) << diag.message;
  EXPECT_EQ(explicit_default->authority(), "h");

  const auto v6 = parse_endpoint("http://[::1]:9000", diag);
  ASSERT_TRUE(v6) << diag.message;
  EXPECT_EQ(v6->host, "[::1]");
  EXPECT_TRUE(v6->ip_host());
  EXPECT_EQ(v6->authority(), "[::1]:9000");
}

TEST(endpoint, rejects_what_is_not_an_http_endpoint) {
  for (const std::string_view url : {"ftp://host", "host:9000", "http://", "http://user:pw@host", "http://host/?q=1",
                                     "http://host/#f", "http://host:0", "http://host:65536", "not a url"}) {
    diagnostics diag;
    const auto parsed = parse_endpoint(url, diag);
    ASSERT_FALSE(parsed) << url;
    EXPECT_EQ(parsed.error(), errc::bad_endpoint) << url;
    EXPECT_NE(diag.message.find(tracing::shown_url(url)), std::string::npos) << diag.message;
  }
}

TEST(endpoint, errors_never_show_user_info_or_secret_query_values) {
  for (const auto& [url, secret] : std::vector<std::pair<std::string, std::string>>{
           {"http://usr:PASSWORDinURL@127.0.0.1:9000", "PASSWORDinURL"},
           {"http://:PASSONLY@127.0.0.1:9000/base", "PASSONLY"},
           {"usr:NOSCHEME@127.0.0.1:9000", "NOSCHEME"},
           {"http://127.0.0.1:9000/?X-Amz-Signature=QUERYSECRET", "QUERYSECRET"},
           {"http://127.0.0.1:9000/?a=1&x-amz-security-token=TOKENSECRET#f", "TOKENSECRET"},
           {"http://127.0.0.1:9000/?password=PW2SECRET", "PW2SECRET"}}) {
    diagnostics diag;
    ASSERT_FALSE(parse_endpoint(url, diag)) << url;
    EXPECT_EQ(diag.message.find(secret), std::string::npos) << diag.message;
    EXPECT_NE(diag.message.find("127.0.0.1:9000"), std::string::npos) << diag.message;
  }
  EXPECT_EQ(tracing::shown_url("http://u:p@h:1/b?x=1"), "http://***@h:1/b?x=1");
  EXPECT_EQ(tracing::shown_url("http://h:1/b?X-Amz-Credential=K&y=2"), "http://h:1/b?X-Amz-Credential=REDACTED&y=2");
  EXPECT_EQ(tracing::shown_url("http://h:1/a@b"), "http://h:1/a@b");  // an '@' in the path is no user info
}

TEST(endpoint, aws_own_endpoints) {
  const auto s3 = aws_endpoint("s3", "eu-west-1");
  EXPECT_EQ(s3.origin(), "https://s3.eu-west-1.amazonaws.com");
  EXPECT_TRUE(s3.aws_owned);
  EXPECT_EQ(aws_endpoint("ec2", "us-east-1").origin(), "https://ec2.us-east-1.amazonaws.com");
  EXPECT_EQ(aws_endpoint("s3", "cn-north-1").origin(), "https://s3.cn-north-1.amazonaws.com.cn");
}

TEST_F(aws_settings, endpoint_order) {
  write_config(
      "[default]\nendpoint_url = http://profile:1\nservices = local\n"
      "[services local]\ns3 =\n  endpoint_url = http://services-s3:2\n");
  const auto origin_for = [&](std::string_view service, std::string_view override_url, const env_map& env) {
    diagnostics diag;
    const auto found = resolve_endpoint(service, override_url, map_environment(env), load(env), diag);
    EXPECT_TRUE(found) << diag.message;
    return found && *found ? (*found)->origin() : std::string("aws");
  };
  auto env = env_with({});
  EXPECT_EQ(origin_for("s3", "", env), "http://services-s3:2");
  EXPECT_EQ(origin_for("ec2", "", env), "http://profile:1");  // [services local] has nothing for EC2
  env["AWS_ENDPOINT_URL"] = "http://generic:3";
  EXPECT_EQ(origin_for("s3", "", env), "http://generic:3");
  EXPECT_EQ(origin_for("ec2", "", env), "http://generic:3");
  env["AWS_ENDPOINT_URL_S3"] = "http://s3-specific:4";
  EXPECT_EQ(origin_for("s3", "", env), "http://s3-specific:4");
  EXPECT_EQ(origin_for("ec2", "", env), "http://generic:3");
  env["AWS_ENDPOINT_URL_EC2"] = "http://ec2-specific:5";
  EXPECT_EQ(origin_for("ec2", "", env), "http://ec2-specific:5");
  EXPECT_EQ(origin_for("s3", "http://override:6", env), "http://override:6");
  env["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "true";
  EXPECT_EQ(origin_for("s3", "", env), "aws");
  EXPECT_EQ(origin_for("s3", "http://override:6", env), "http://override:6");

  const auto nothing = env_with({});
  write_config("[default]\nregion = eu-west-1\n");
  EXPECT_EQ(origin_for("s3", "", nothing), "aws");
}

TEST_F(aws_settings, a_bad_configured_endpoint_says_where_it_came_from) {
  diagnostics diag;
  const auto env = env_with({{"AWS_ENDPOINT_URL_S3", "ftp://nope"}});
  const auto found = resolve_endpoint("s3", "", map_environment(env), load(env), diag);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error(), errc::bad_endpoint);
  EXPECT_NE(diag.message.find("AWS_ENDPOINT_URL_S3"), std::string::npos) << diag.message;
}

// ---------------------------------------------------------------------------------------------
// Addressing

TEST(addressing, parses_the_three_styles) {
  diagnostics diag;
  EXPECT_EQ(parse_addressing_style("auto", diag).value(), addressing_style::automatic);
  EXPECT_EQ(parse_addressing_style("path", diag).value(), addressing_style::path);
  EXPECT_EQ(parse_addressing_style("virtual", diag).value(), addressing_style::virtual_hosted);
  const auto bad = parse_addressing_style("Virtual", diag);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), errc::bad_addressing_style);
}

TEST_F(aws_settings, addressing_style_from_override_then_profile) {
  write_config("[default]\ns3 =\n  addressing_style = virtual\n");
  const auto profile = load(env_with({}));
  diagnostics diag;
  EXPECT_EQ(resolve_addressing_style("", profile, diag).value(), addressing_style::virtual_hosted);
  EXPECT_EQ(resolve_addressing_style("path", profile, diag).value(), addressing_style::path);
  EXPECT_EQ(resolve_addressing_style("", aws_profile{}, diag).value(), addressing_style::automatic);
}

TEST(addressing, dns_compatible_buckets) {
  EXPECT_TRUE(is_dns_compatible_bucket("my-bucket", false));
  EXPECT_TRUE(is_dns_compatible_bucket("abc", false));
  EXPECT_FALSE(is_dns_compatible_bucket("ab", false));
  EXPECT_FALSE(is_dns_compatible_bucket(std::string(64, 'a'), false));
  EXPECT_FALSE(is_dns_compatible_bucket("My-Bucket", false));
  EXPECT_FALSE(is_dns_compatible_bucket("my_bucket", false));
  EXPECT_FALSE(is_dns_compatible_bucket("-bucket", false));
  EXPECT_FALSE(is_dns_compatible_bucket("bucket-", false));
  EXPECT_FALSE(is_dns_compatible_bucket("my.bucket", false));
  EXPECT_TRUE(is_dns_compatible_bucket("my.bucket", true));
  EXPECT_FALSE(is_dns_compatible_bucket("my..bucket", true));
  EXPECT_FALSE(is_dns_compatible_bucket("192.168.1.1", true));
}

TEST(addressing, auto_is_virtual_only_on_aws_for_plain_names) {
  const auto aws = aws_endpoint("s3", "eu-west-1");
  diagnostics diag;
  const auto custom = parse_endpoint("http://minio.local:9000", diag).value();
  const auto ip = parse_endpoint("http://127.0.0.1:9000", diag).value();

  EXPECT_TRUE(uses_virtual_host(aws, "my-bucket", addressing_style::automatic));
  EXPECT_FALSE(uses_virtual_host(aws, "my.bucket", addressing_style::automatic));
  EXPECT_FALSE(uses_virtual_host(aws, "My_Bucket", addressing_style::automatic));
  EXPECT_FALSE(uses_virtual_host(aws, "my-bucket", addressing_style::path));
  EXPECT_FALSE(uses_virtual_host(custom, "my-bucket", addressing_style::automatic));
  EXPECT_TRUE(uses_virtual_host(custom, "my-bucket", addressing_style::virtual_hosted));
  EXPECT_TRUE(uses_virtual_host(custom, "my.bucket", addressing_style::virtual_hosted));  // http: no certificate
  EXPECT_FALSE(uses_virtual_host(aws, "my.bucket", addressing_style::virtual_hosted));
  EXPECT_TRUE(uses_virtual_host(aws, "my-bucket", addressing_style::virtual_hosted));
  EXPECT_FALSE(uses_virtual_host(custom, "My_Bucket", addressing_style::virtual_hosted));
  EXPECT_FALSE(uses_virtual_host(ip, "my-bucket", addressing_style::virtual_hosted));
}

TEST(addressing, locations_for_objects_and_buckets) {
  diagnostics diag;
  const auto aws = aws_endpoint("s3", "eu-west-1");
  const auto custom = parse_endpoint("http://minio.local:9000/prefix", diag).value();

  const auto virtual_object = locate_object(aws, "my-bucket", "dir/some key+1.txt", addressing_style::automatic);
  EXPECT_EQ(virtual_object.origin, "https://my-bucket.s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(virtual_object.host, "my-bucket.s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(virtual_object.path, "/dir/some%20key%2B1.txt");

  const auto virtual_bucket = locate_object(aws, "my-bucket", "", addressing_style::automatic);
  EXPECT_EQ(virtual_bucket.path, "/");

  const auto path_object = locate_object(custom, "bucket", "a/b~c", addressing_style::automatic);
  EXPECT_EQ(path_object.origin, "http://minio.local:9000");
  EXPECT_EQ(path_object.host, "minio.local:9000");
  EXPECT_EQ(path_object.path, "/prefix/bucket/a/b~c");

  const auto path_bucket = locate_object(custom, "bucket", "", addressing_style::automatic);
  EXPECT_EQ(path_bucket.path, "/prefix/bucket");

  const auto virtual_custom = locate_object(custom, "bucket", "k", addressing_style::virtual_hosted);
  EXPECT_EQ(virtual_custom.host, "bucket.minio.local:9000");
  EXPECT_EQ(virtual_custom.path, "/prefix/k");
}

}  // namespace
}  // namespace ferry::net
