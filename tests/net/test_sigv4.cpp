// SigV4 against AWS's published test suite, AWS's documented S3 examples, and botocore itself.
#include "net/sigv4.hpp"

#include "net/digest.hpp"
#include "net/endpoint.hpp"
#include "net/uri_encode.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

namespace ferry::net {
namespace {

namespace json = boost::json;
using namespace std::chrono;
using sigv4::signer;

system_clock::time_point at(year_month_day day, hours h, minutes m, seconds s) { return sys_days(day) + h + m + s; }

credentials make_credentials(std::string key_id, std::string secret, std::string token = {}) {
  return credentials{std::move(key_id), secret_string(std::move(secret)), secret_string(std::move(token)), "test"};
}

// ---------------------------------------------------------------------------------------------
// The AWS Signature Version 4 test suite, as ../shared/testdata/README.md describes it.

// The README gives the suite's date; the JSON's config carries no date of its own.
const auto suite_time = at(2015y / August / 30, 12h, 36min, 0s);

struct suite_case {
  std::string name;
  std::string group;  // basic, normalizePath or sts
  sigv4::request request;
  std::string creq;
  std::string sts;
  std::string authz;
};

struct suite {
  std::string load_error;
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string region;
  std::string service;
  std::vector<suite_case> cases;
  std::map<std::string, std::vector<std::string>> groups;
};

std::vector<sigv4::query_parameter> parse_query(std::string_view text) {
  std::vector<sigv4::query_parameter> out;
  while (!text.empty()) {
    const auto amp = text.find('&');
    const auto pair = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view() : text.substr(amp + 1);
    const auto eq = pair.find('=');
    out.emplace_back(uri_decode(pair.substr(0, eq)),
                     eq == std::string_view::npos ? std::string() : uri_decode(pair.substr(eq + 1)));
  }
  return out;
}

suite_case parse_case(const json::object& c) {
  suite_case out;
  out.name = json::value_to<std::string>(c.at("name"));
  out.creq = json::value_to<std::string>(c.at("creq"));
  out.sts = json::value_to<std::string>(c.at("sts"));
  out.authz = json::value_to<std::string>(c.at("authz"));
  const auto& r = c.at("request").as_object();
  out.request.method = json::value_to<std::string>(r.at("method"));
  out.request.path = json::value_to<std::string>(r.at("path"));
  out.request.query = parse_query(json::value_to<std::string>(r.at("query")));
  for (const auto& h : r.at("headers").as_array()) {
    const auto& pair = h.as_array();
    out.request.headers.push_back({json::value_to<std::string>(pair.at(0)), json::value_to<std::string>(pair.at(1))});
  }
  out.request.payload_hash = hex_sha256(json::value_to<std::string>(r.at("body")));
  return out;
}

suite read_suite() {
  suite out;
  const std::filesystem::path file = FERRY_SHARED_DIR "/testdata/aws-sigv4-test-suite.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    out.load_error = "cannot open " + file.string();
    return out;
  }
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  boost::system::error_code ec;
  const auto doc = json::parse(text, ec);
  if (ec) {
    out.load_error = file.string() + ": " + ec.message();
    return out;
  }
  const auto& config = doc.at("config").as_object();
  out.access_key_id = json::value_to<std::string>(config.at("accessKeyId"));
  out.secret_access_key = json::value_to<std::string>(config.at("secretAccessKey"));
  out.region = json::value_to<std::string>(config.at("region"));
  out.service = json::value_to<std::string>(config.at("service"));
  out.session_token = json::value_to<std::string>(doc.at("stsToken"));
  const auto& tests = doc.at("tests").as_object();
  std::map<std::string, std::string> group_of;
  for (const auto& [group, cases] : tests) {
    if (group == "all") continue;
    for (const auto& c : cases.as_array()) {
      const auto name = json::value_to<std::string>(c.at("name"));
      out.groups[group].push_back(name);
      group_of[name] = group;
    }
  }
  for (const auto& c : tests.at("all").as_array()) {
    auto parsed = parse_case(c.as_object());
    parsed.group = group_of[parsed.name];
    out.cases.push_back(std::move(parsed));
  }
  return out;
}

const suite& the_suite() {
  static const suite instance = read_suite();
  return instance;
}

std::vector<suite_case> suite_cases() { return the_suite().cases; }

std::string last_line(std::string_view text) { return std::string(text.substr(text.rfind('\n') + 1)); }

std::string signature_of(std::string_view authorization) {
  const auto at_sig = authorization.find("Signature=");
  return at_sig == std::string_view::npos ? std::string() : std::string(authorization.substr(at_sig + 10));
}

TEST(aws_sigv4_suite_file, loads_every_case_into_exactly_one_group) {
  const auto& s = the_suite();
  ASSERT_EQ(s.load_error, "");
  EXPECT_EQ(s.cases.size(), 28u);
  std::set<std::string> grouped;
  for (const auto& [group, names] : s.groups) {
    EXPECT_TRUE(group == "basic" || group == "normalizePath" || group == "sts") << group;
    for (const auto& name : names) EXPECT_TRUE(grouped.insert(name).second) << name << " is in two groups";
  }
  for (const auto& c : s.cases) EXPECT_EQ(grouped.count(c.name), 1u) << c.name << " is in no group";
}

// gtest names the failing case by this rather than by dumping the struct's bytes.
void PrintTo(const suite_case& c, std::ostream* out) { *out << c.name; }

class aws_sigv4_suite : public testing::TestWithParam<suite_case> {};

// Every case is signed through signer::sign_headers, the path real requests take. The suite's
// service ("service") is a generic one: its paths are normalised and encoded twice.
TEST_P(aws_sigv4_suite, canonical_request_string_to_sign_and_authorization_match) {
  const auto& s = the_suite();
  const auto& c = GetParam();
  auto how = sigv4::generic_service_rules();
  // The two STS cases differ only in whether the token is part of the signature.
  if (c.name == "post-sts-header-after") how.sign_session_token = false;
  const std::string token = c.group == "sts" ? s.session_token : std::string();
  const signer sign(make_credentials(s.access_key_id, s.secret_access_key, token), s.region, s.service, how);

  auto request = c.request;
  const auto out = sign.sign_headers(request, suite_time);
  EXPECT_EQ(out.canonical_request, c.creq);

  if (hex_sha256(c.creq) != last_line(c.sts)) {
    // The suite's own files disagree: its string to sign hashes a different canonical request
    // than the one it lists, so no signer can match all three. What can be checked: our canonical
    // request equals the listed one (above), and our key signs the listed string to sign into the
    // listed signature.
    const auto key = sigv4::derive_signing_key(s.secret_access_key, "20150830", s.region, s.service);
    EXPECT_EQ(sigv4::signature(key, c.sts), signature_of(c.authz));
    GTEST_SKIP() << "suite erratum: its string to sign hashes another canonical request than its creq (one "
                    "without content-length, as in AWS's older files); checked: canonical request, and that the "
                    "suite's string to sign signs to its signature; not checkable: string to sign, Authorization";
  }
  EXPECT_EQ(out.string_to_sign, c.sts);
  EXPECT_EQ(out.authorization, c.authz);

  ASSERT_FALSE(request.headers.empty());
  if (c.name == "post-sts-header-after") {
    EXPECT_EQ(request.headers.back().name, "X-Amz-Security-Token");
    EXPECT_EQ(request.headers.back().value, s.session_token);
  } else {
    EXPECT_EQ(request.headers.back().name, "Authorization");
    EXPECT_EQ(request.headers.back().value, c.authz);
  }
}

std::string case_name(const testing::TestParamInfo<suite_case>& info) {
  std::string name = info.param.name;
  for (auto& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(all, aws_sigv4_suite, testing::ValuesIn(suite_cases()), case_name);

// ---------------------------------------------------------------------------------------------
// Pieces, and the rules the suite does not reach.

TEST(sigv4, s3_rules_sign_the_path_as_given) {
  const auto s3 = sigv4::s3_rules();
  EXPECT_EQ(sigv4::canonical_uri("/example/..", s3), "/example/..");
  EXPECT_EQ(sigv4::canonical_uri("//example//", s3), "//example//");
  EXPECT_EQ(sigv4::canonical_uri("/bucket/some%20key", s3), "/bucket/some%20key");
  EXPECT_EQ(sigv4::canonical_uri("", s3), "/");
}

TEST(sigv4, generic_rules_normalise_and_encode_twice) {
  const auto generic = sigv4::generic_service_rules();
  EXPECT_EQ(sigv4::canonical_uri("/a/./b/../c//d/", generic), "/a/c/d/");
  EXPECT_EQ(sigv4::canonical_uri("/example%20space/", generic), "/example%2520space/");
  EXPECT_EQ(sigv4::canonical_uri("", generic), "/");
  EXPECT_EQ(sigv4::normalize_path("/.."), "/");
  EXPECT_EQ(sigv4::normalize_path("/a/b/.."), "/a");
}

TEST(sigv4, uri_encoding_keeps_only_unreserved) {
  EXPECT_EQ(uri_encode("AZaz09-_.~"), "AZaz09-_.~");
  EXPECT_EQ(uri_encode("a b+c/d=e&f%"), "a%20b%2Bc%2Fd%3De%26f%25");
  EXPECT_EQ(uri_encode("a b/c", slash::keep), "a%20b/c");
  EXPECT_EQ(uri_encode("\xe1\x88\xb4"), "%E1%88%B4");
  EXPECT_EQ(uri_decode("%E1%88%B4+%2f%zz%4"), "\xe1\x88\xb4+/%zz%4");
}

TEST(sigv4, query_sorts_by_encoded_name_then_value) {
  const std::vector<sigv4::query_parameter> query = {{"b", "2"}, {"a b", "z"}, {"a", "y"}, {"a", "x"}, {"A", ""}};
  EXPECT_EQ(sigv4::canonical_query(query), "A=&a=x&a=y&a%20b=z&b=2");
}

TEST(sigv4, folded_and_padded_header_values_collapse_to_single_spaces) {
  // The newer suite's get-header-value-multiline: an obsolete line fold is whitespace like any other.
  sigv4::request request;
  request.headers = {{"Host", "example.amazonaws.com"},
                     {"My-Header1", "value1\n  value2\n     value3"},
                     {"my-header2", " \t a \r\n b  "},
                     {"User-Agent", "not signed"}};
  const auto creq = sigv4::canonical_request(request, sigv4::generic_service_rules());
  EXPECT_NE(creq.find("\nmy-header1:value1 value2 value3\nmy-header2:a b\n\nhost;my-header1;my-header2\n"),
            std::string::npos)
      << creq;
  EXPECT_EQ(sigv4::signed_header_names(request.headers), "host;my-header1;my-header2");
}

TEST(sigv4, timestamps_are_utc_basic_format) {
  const sigv4::amz_time leap(at(2024y / February / 29, 23h, 59min, 59s) + milliseconds(999));
  EXPECT_EQ(leap.timestamp(), "20240229T235959Z");
  EXPECT_EQ(leap.date(), "20240229");
  EXPECT_EQ(sigv4::amz_time(system_clock::time_point()).timestamp(), "19700101T000000Z");
}

// The example in AWS's "Signature Version 4 signing process" documentation.
TEST(sigv4, signing_key_matches_aws_documentation) {
  const auto key =
      sigv4::derive_signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam");
  EXPECT_EQ(to_hex(key), "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
}

TEST(sigv4, key_cache_derives_once_per_day_region_and_service) {
  const sigv4::signing_key_cache cache;
  const secret_string secret("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
  const auto first = cache.get(secret, "20120215", "us-east-1", "iam");
  EXPECT_EQ(first, cache.get(secret, "20120215", "us-east-1", "iam"));
  EXPECT_EQ(to_hex(first), "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
  EXPECT_NE(first, cache.get(secret, "20120216", "us-east-1", "iam"));
  EXPECT_NE(first, cache.get(secret, "20120215", "eu-west-1", "iam"));
  EXPECT_NE(first, cache.get(secret, "20120215", "us-east-1", "s3"));
  EXPECT_NE(first, cache.get(secret_string("other"), "20120215", "us-east-1", "iam"));
  // More entries than it keeps: still right after eviction.
  for (int day = 10; day < 20; ++day) cache.get(secret, "201202" + std::to_string(day), "us-east-1", "iam");
  EXPECT_EQ(first, cache.get(secret, "20120215", "us-east-1", "iam"));
}

// AWS's S3 documentation, "Signature Calculations for the Authorization Header": GET Object.
TEST(sigv4, s3_get_object_matches_aws_documentation) {
  const signer sign(make_credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), "us-east-1",
                    "s3", sigv4::s3_rules());
  sigv4::request request;
  request.path = "/test.txt";
  request.headers = {{"Host", "examplebucket.s3.amazonaws.com"}, {"Range", "bytes=0-9"}};
  const auto out = sign.sign_headers(request, at(2013y / May / 24, 0h, 0min, 0s));
  EXPECT_EQ(out.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  ASSERT_NE(request.find_header("x-amz-content-sha256"), nullptr);
  EXPECT_EQ(request.find_header("x-amz-content-sha256")->value, sigv4::empty_payload_sha256);
}

// The same documentation, "Authenticating Requests: Using Query Parameters".
TEST(sigv4, s3_presigned_url_matches_aws_documentation) {
  const signer sign(make_credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), "us-east-1",
                    "s3", sigv4::s3_rules());
  sigv4::request request;
  request.path = "/test.txt";
  request.headers = {{"Host", "examplebucket.s3.amazonaws.com"}};
  const auto out = sign.presign(request, "https", at(2013y / May / 24, 0h, 0min, 0s), 86400s);
  EXPECT_EQ(out.signature, "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  EXPECT_EQ(out.url,
            "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
            "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
            "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
}

TEST(sigv4, signing_again_replaces_rather_than_duplicates) {
  const signer sign(make_credentials("AKID", "secret", "token"), "us-east-1", "s3", sigv4::s3_rules());
  sigv4::request request;
  request.method = "PUT";
  request.path = "/bucket/key";
  request.headers = {{"Host", "127.0.0.1:9000"}};
  request.payload_hash = hex_sha256("body");
  const auto first = sign.sign_headers(request, at(2020y / January / 1, 0h, 0min, 0s));
  const auto second = sign.sign_headers(request, at(2020y / January / 1, 0h, 0min, 1s));
  EXPECT_NE(first.authorization, second.authorization);
  std::map<std::string, int> counts;
  for (const auto& h : request.headers) ++counts[h.name];
  EXPECT_EQ(counts, (std::map<std::string, int>{{"Authorization", 1},
                                                {"Host", 1},
                                                {"X-Amz-Content-SHA256", 1},
                                                {"X-Amz-Date", 1},
                                                {"X-Amz-Security-Token", 1}}));
  EXPECT_EQ(request.find_header("authorization")->value, second.authorization);
}

TEST(sigv4, presign_rejects_expiry_outside_aws_limits) {
  const signer sign(make_credentials("AKID", "secret"), "us-east-1", "s3", sigv4::s3_rules());
  sigv4::request request;
  request.headers = {{"Host", "example.com"}};
  EXPECT_THROW(sign.presign(request, "https", system_clock::now(), 0s), std::invalid_argument);
  EXPECT_THROW(sign.presign(request, "https", system_clock::now(), 604801s), std::invalid_argument);
  EXPECT_NO_THROW(sign.presign(request, "https", system_clock::now(), 604800s));
  sigv4::request no_host;
  EXPECT_THROW(sign.sign_headers(no_host, system_clock::now()), std::invalid_argument);
}

TEST(sigv4, streamed_hash_equals_one_shot) {
  sha256_stream stream;
  stream.update("hello ");
  stream.update("world");
  EXPECT_EQ(to_hex(stream.finish()), hex_sha256("hello world"));
  stream.reset();
  EXPECT_EQ(to_hex(stream.finish()), sigv4::empty_payload_sha256);
  // RFC 4231 test case 6: a key longer than SHA-256's block is hashed first.
  EXPECT_EQ(to_hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

// ---------------------------------------------------------------------------------------------
// botocore, signing the same requests with the same clock.

// Runs botocore's signers at a fixed time and prints what they produce as one JSON list.
constexpr std::string_view botocore_script = R"py(
import datetime, json, sys
from unittest import mock
import botocore.auth, botocore.session
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

def credentials(c):
    return Credentials(c["access_key"], c["secret_key"], c.get("token"))

def presign_client(c):
    client = botocore.session.Session().create_client(
        "s3", region_name=c["region"], endpoint_url=c.get("endpoint"),
        aws_access_key_id=c["access_key"], aws_secret_access_key=c["secret_key"],
        aws_session_token=c.get("token"),
        config=Config(signature_version="s3v4", s3={"addressing_style": c["style"]}))
    return client.generate_presigned_url(
        "get_object", Params={"Bucket": c["bucket"], "Key": c["key"]}, ExpiresIn=c["expires"])

def presign_request(c):
    request = AWSRequest(method=c["method"], url=c["url"])
    botocore.auth.S3SigV4QueryAuth(credentials(c), "s3", c["region"], expires=c["expires"]).add_auth(request)
    return request.url

def sign_headers(c):
    request = AWSRequest(method=c["method"], url=c["url"], data=c["body"].encode(), headers=c["headers"])
    botocore.auth.S3SigV4Auth(credentials(c), "s3", c["region"]).add_auth(request)
    return request.headers["Authorization"]

kinds = {"presign_client": presign_client, "presign_request": presign_request, "sign_headers": sign_headers}
out = []
for c in json.load(open(sys.argv[1], encoding="utf-8")):
    when = datetime.datetime.strptime(c["time"], "%Y%m%dT%H%M%SZ")
    with mock.patch("botocore.auth.get_current_datetime", return_value=when):
        out.append(kinds[c["kind"]](c))
print(json.dumps(out))
)py";

// The first python3 (on PATH, then pyenv's) that can import botocore.
std::optional<std::string> botocore_python() {
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (!dir.empty()) candidates.push_back(dir + "/python3");
    }
  }
  candidates.push_back("/root/.pyenv/shims/python3");
  for (const auto& candidate : candidates) {
    std::error_code ec;
    if (!std::filesystem::exists(candidate, ec)) continue;
    const auto probe = test::run({candidate, "-c", "import botocore"});
    if (probe.exit_code == 0) return candidate;
  }
  return std::nullopt;
}

class botocore_comparison : public testing::Test {
 protected:
  static void SetUpTestSuite() { python_ = new std::optional<std::string>(botocore_python()); }
  static void TearDownTestSuite() {
    delete python_;
    python_ = nullptr;
  }

  void SetUp() override {
    if (!*python_) GTEST_SKIP() << "no python3 on PATH (or pyenv's) can import botocore";
  }

  // Runs every case through botocore at once and returns its answers in order.
  std::vector<std::string> ask_botocore(const json::array& cases) {
    const auto input = dir_.write("cases.json", json::serialize(cases));
    const auto script = dir_.write("sign.py", botocore_script);
    test::process_options options;
    // botocore must see only what the cases give it, not the AWS settings of whoever runs the tests.
    for (const char* name : {"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                             "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
                             "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT"}) {
      options.unset_env.emplace_back(name);
    }
    options.env["AWS_CONFIG_FILE"] = (dir_ / "no-config").string();
    options.env["AWS_SHARED_CREDENTIALS_FILE"] = (dir_ / "no-credentials").string();
    const auto result = test::run({**python_, script.string(), input.string()}, options);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    std::vector<std::string> answers;
    if (result.exit_code != 0) return answers;
    const auto parsed = json::parse(result.out);
    for (const auto& answer : parsed.as_array()) answers.push_back(json::value_to<std::string>(answer));
    return answers;
  }

  static inline std::optional<std::string>* python_ = nullptr;
  test::temp_dir dir_;
};

constexpr std::string_view access_key = "AKIDEXAMPLE";
constexpr std::string_view secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
constexpr std::string_view session_token = "IQoJb3JpZ2luX2VjEXAMPLE//////////+token/with=specials";
const auto compare_time = at(2024y / February / 29, 23h, 59min, 58s);
constexpr std::string_view compare_stamp = "20240229T235958Z";

json::object base_case(std::string_view case_kind, std::string_view region, std::string_view token) {
  json::object c{{"kind", case_kind},
                 {"time", compare_stamp},
                 {"region", region},
                 {"access_key", access_key},
                 {"secret_key", secret_key}};
  if (!token.empty()) c["token"] = token;
  return c;
}

signer s3_signer(std::string_view region, std::string_view token) {
  return signer(make_credentials(std::string(access_key), std::string(secret_key), std::string(token)),
                std::string(region), "s3", sigv4::s3_rules());
}

// Object keys that exercise the encoder: spaces, '+', UTF-8, '~', '/', reserved punctuation.
const std::vector<std::string> tricky_keys = {
    "plain.txt",
    "some key/with+plus",
    "ünïcödé/ファイル.tar.gz",
    "tilde~and.dots-_/deep/er/",
    "reserved !\"#$&'()*,:;=?@[]^`{|}%",
    "percent%2Fliteral",
};

TEST_F(botocore_comparison, presigned_get_urls_on_custom_and_aws_endpoints) {
  struct expected_case {
    std::string endpoint;  // empty: AWS's own
    std::string region;
    std::string style;
    std::string bucket;
    std::string key;
    std::string token;
    std::string botocore_style;  // when botocore needs another word for the same addressing
  };
  std::vector<expected_case> cases;
  for (const auto& key : tricky_keys) {
    cases.push_back({"http://127.0.0.1:9000", "us-east-1", "path", "bucket", key, ""});
    cases.push_back({"http://127.0.0.1:9000", "eu-west-1", "auto", "bucket", key, std::string(session_token)});
  }
  cases.push_back({"https://minio.example.com:8443", "eu-central-1", "virtual", "my-bucket", "some key", ""});
  cases.push_back({"http://minio.example.com", "eu-central-1", "virtual", "my.bucket", "k", ""});
  // botocore presigns "auto" virtual-hosted URLs on the legacy global host (my-bucket.s3.amazonaws.com);
  // asked for "virtual" it uses the regional host that ferry's automatic choice gives.
  cases.push_back({"", "eu-west-1", "auto", "my-bucket", "some key/with+plus", "", "virtual"});
  cases.push_back({"", "eu-west-1", "auto", "my.dotted.bucket", "k", std::string(session_token)});
  cases.push_back({"", "eu-west-1", "virtual", "my.dotted.bucket", "k", ""});
  cases.push_back({"", "ap-southeast-2", "path", "my-bucket", "k", ""});

  json::array requests;
  for (const auto& c : cases) {
    auto r = base_case("presign_client", c.region, c.token);
    if (!c.endpoint.empty()) r["endpoint"] = c.endpoint;
    r["style"] = c.botocore_style.empty() ? c.style : c.botocore_style;
    r["bucket"] = c.bucket;
    r["key"] = c.key;
    r["expires"] = 3600;
    requests.push_back(std::move(r));
  }
  const auto answers = ask_botocore(requests);
  ASSERT_EQ(answers.size(), cases.size());

  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    diagnostics diag;
    const auto at_endpoint =
        c.endpoint.empty() ? result<endpoint>(aws_endpoint("s3", c.region)) : parse_endpoint(c.endpoint, diag);
    ASSERT_TRUE(at_endpoint) << diag.message;
    const auto style = parse_addressing_style(c.style, diag);
    ASSERT_TRUE(style) << diag.message;
    const auto where = locate_object(*at_endpoint, c.bucket, c.key, *style);
    sigv4::request request;
    request.path = where.path;
    request.headers = {{"Host", where.host}};
    const auto ours = s3_signer(c.region, c.token).presign(request, at_endpoint->scheme, compare_time, 3600s);
    EXPECT_EQ(ours.url, answers[i]) << "endpoint '" << c.endpoint << "' style " << c.style << " key '" << c.key << "'";
  }
}

TEST_F(botocore_comparison, presigned_url_keeps_the_request_query_first) {
  // A path signed exactly as given ('+' raw) and query parameters, one without a value.
  const std::string path = "/bucket/some%20key/with+plus";
  const std::vector<sigv4::query_parameter> query = {
      {"x", ""}, {"response-content-type", "text/plain; charset=utf-8"}, {"versionId", "3/L4kqtJl~"}};
  const std::string url = "http://127.0.0.1:9000" + path +
                          "?x&response-content-type=text%2Fplain%3B%20charset%3Dutf-8&versionId=3%2FL4kqtJl~";
  json::array requests;
  for (const std::string_view token : {std::string_view(), session_token}) {
    auto r = base_case("presign_request", "us-west-2", token);
    r["method"] = "GET";
    r["url"] = url;
    r["expires"] = 900;
    requests.push_back(std::move(r));
  }
  const auto answers = ask_botocore(requests);
  ASSERT_EQ(answers.size(), 2u);

  sigv4::request request;
  request.path = path;
  request.query = query;
  request.headers = {{"Host", "127.0.0.1:9000"}};
  EXPECT_EQ(s3_signer("us-west-2", "").presign(request, "http", compare_time, 900s).url, answers[0]);
  EXPECT_EQ(s3_signer("us-west-2", session_token).presign(request, "http", compare_time, 900s).url, answers[1]);
}

TEST_F(botocore_comparison, s3_put_authorization_header) {
  struct put_case {
    std::string key;
    std::string body;
    std::string content_type;
    std::string token;
  };
  const std::vector<put_case> cases = {
      {"plain.txt", "hello world\n", "text/plain", ""},
      {"some key/with+plus", "", "", std::string(session_token)},
      {tricky_keys[2], std::string(100000, 'x'), "application/gzip", std::string(session_token)},
  };
  diagnostics diag;
  const auto custom = parse_endpoint("http://127.0.0.1:9000", diag);
  ASSERT_TRUE(custom) << diag.message;

  json::array requests;
  for (const auto& c : cases) {
    const auto where = locate_object(*custom, "bucket", c.key, addressing_style::automatic);
    auto r = base_case("sign_headers", "eu-west-1", c.token);
    r["method"] = "PUT";
    r["url"] = where.origin + where.path;
    r["body"] = c.body;
    json::object headers;
    if (!c.content_type.empty()) headers["Content-Type"] = c.content_type;
    r["headers"] = std::move(headers);
    requests.push_back(std::move(r));
  }
  const auto answers = ask_botocore(requests);
  ASSERT_EQ(answers.size(), cases.size());

  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto where = locate_object(*custom, "bucket", c.key, addressing_style::automatic);
    sigv4::request request;
    request.method = "PUT";
    request.path = where.path;
    request.headers = {{"Host", where.host}};
    if (!c.content_type.empty()) request.headers.push_back({"Content-Type", c.content_type});
    request.payload_hash = hex_sha256(c.body);
    const auto ours = s3_signer("eu-west-1", c.token).sign_headers(request, compare_time);
    EXPECT_EQ(ours.authorization, answers[i]) << "key '" << c.key << "'\n" << ours.canonical_request;
  }
}

}  // namespace
}  // namespace ferry::net
