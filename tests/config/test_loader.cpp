#include "config/error.hpp"
#include "config/loader.hpp"

#include "support/temp_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>

namespace ferry::config {
namespace {

using test::temp_dir;

struct fixture : ::testing::Test {
  temp_dir dir;
  std::map<std::string, std::string, std::less<>> env;

  void SetUp() override {
    env["HOME"] = dir.path().string();
    env["XDG_CONFIG_HOME"] = (dir / "xdg-config").string();
  }

  load_options options() {
    load_options o;
    o.working_dir = dir / "project";
    o.env = [this](std::string_view name) -> std::optional<std::string> {
      auto it = env.find(name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
    return o;
  }

  result<loaded_config> load_with(const load_options& o, diagnostics& diag) { return load(o, diag); }
};

TEST_F(fixture, defaults_apply_when_nothing_is_set) {
  diagnostics diag;
  auto c = load(options(), diag);
  ASSERT_TRUE(c) << diag.message;
  EXPECT_EQ(c->values.nodes.provider, "local");
  EXPECT_EQ(c->values.net.connect_timeout, std::chrono::seconds(10));
  EXPECT_EQ(c->values.s3.part_size.bytes, 8u << 20);
  EXPECT_EQ(c->origin.at("nodes.provider"), "default");
  EXPECT_EQ(c->values.dirs.config, dir / "xdg-config" / "ferry");
  EXPECT_EQ(c->values.dirs.cache, dir / ".cache" / "ferry");
}

TEST_F(fixture, sources_apply_in_order_flags_env_project_user_defaults) {
  dir.write("xdg-config/ferry/config.toml",
            "[net]\nconnect_timeout = \"1s\"\nread_timeout = \"2s\"\nwrite_timeout = \"3s\"\n"
            "max_connections_per_host = 3\n");
  dir.write("project/ferry.toml", "[net]\nread_timeout = \"20s\"\nwrite_timeout = \"30s\"\nmax_connections_per_host = 4\n");
  env["FERRY_NET_WRITE_TIMEOUT"] = "300ms";
  env["FERRY_NET_MAX_CONNECTIONS_PER_HOST"] = "5";
  auto o = options();
  o.flags.push_back({"net.max_connections_per_host", "6", "--connections"});
  diagnostics diag;
  auto c = load(o, diag);
  ASSERT_TRUE(c) << diag.message;
  EXPECT_EQ(c->values.net.connect_timeout, std::chrono::seconds(1));
  EXPECT_EQ(c->values.net.read_timeout, std::chrono::seconds(20));
  EXPECT_EQ(c->values.net.write_timeout, std::chrono::milliseconds(300));
  EXPECT_EQ(c->values.net.max_connections_per_host, 6);
  EXPECT_EQ(c->origin.at("net.connect_timeout"), (dir / "xdg-config/ferry/config.toml").string() + ":2:19");
  EXPECT_EQ(c->origin.at("net.read_timeout"), (dir / "project/ferry.toml").string() + ":2:16");
  EXPECT_EQ(c->origin.at("net.write_timeout"), "environment FERRY_NET_WRITE_TIMEOUT");
  EXPECT_EQ(c->origin.at("net.max_connections_per_host"), "flag --connections");
  ASSERT_EQ(c->files.size(), 2u);
}

TEST_F(fixture, named_environment_variables_and_dotted_keys) {
  env["FERRY_STORAGE_URL"] = "s3://bucket/prefix";
  env["FERRY_PROVIDER"] = "ssh";
  dir.write("project/ferry.toml", "net.retry.max_attempts = 9\npackaging.excludes = [\"*.csv\", \"data/\"]\n");
  diagnostics diag;
  auto c = load(options(), diag);
  ASSERT_TRUE(c) << diag.message;
  EXPECT_EQ(c->values.storage.url, "s3://bucket/prefix");
  EXPECT_EQ(c->values.nodes.provider, "ssh");
  EXPECT_EQ(c->values.net.retry.max_attempts, 9);
  EXPECT_EQ(c->values.packaging.excludes, (std::vector<std::string>{"*.csv", "data/"}));
}

struct bad_case {
  std::string content;
  errc code;
  std::string position;  // expected "line:column" after the file name
  std::string words;     // expected in the message
};

class bad_file : public fixture, public ::testing::WithParamInterface<bad_case> {};

TEST_P(bad_file, is_an_error_naming_file_line_column) {
  const auto& p = GetParam();
  const auto file = dir.write("project/ferry.toml", p.content);
  diagnostics diag;
  auto c = load(options(), diag);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), make_error_code(p.code)) << diag.message;
  EXPECT_NE(diag.message.find(file.string() + ":" + p.position), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find(p.words), std::string::npos) << diag.message;
}

INSTANTIATE_TEST_SUITE_P(
    config, bad_file,
    ::testing::Values(bad_case{"[net]\nconect_timeout = \"1s\"\n", errc::unknown_key, "2:1", "did you mean 'net.connect_timeout'"},
                      bad_case{"[nope]\nx = 1\n", errc::unknown_key, "2:1", "unknown key 'nope.x'"},
                      bad_case{"[agent]\nidle_timeout = \"5m\"\n", errc::unknown_key, "2:1",
                               "did you mean 'nodes.idle_timeout' or 'ssh.idle_timeout' or 'pool.idle_timeout'?"},
                      bad_case{"[agent]\nidle_timout = \"5m\"\n", errc::unknown_key, "2:1",
                               "did you mean 'nodes.idle_timeout' or 'ssh.idle_timeout' or 'pool.idle_timeout'?"},
                      bad_case{"[net]\nmax_connections_per_host = \"many\"\n", errc::wrong_type, "2:28", "expected an integer"},
                      bad_case{"[nodes]\nprovider = 3\n", errc::wrong_type, "2:12", "expected a string"},
                      bad_case{"[pool]\nname = \"../team\"\n", errc::bad_value, "2:8", "'../team' is not a pool name"},
                      bad_case{"[pool]\nlease_ttl = \"5s\"\n", errc::bad_value, "2:13", "too short"},
                      bad_case{"[nodes]\nprovider = \"gcp\"\n", errc::bad_value, "2:12", "not one of: local, ssh, ec2"},
                      bad_case{"[net]\nconnect_timeout = \"10 parsecs\"\n", errc::bad_value, "2:19", "not a duration"},
                      bad_case{"[net]\nread_timeout = inf\n", errc::bad_value, "2:16", "not a duration"},
                      bad_case{"[net]\nread_timeout = nan\n", errc::bad_value, "2:16", "not a duration"},
                      bad_case{"[net]\nread_timeout = 1e300\n", errc::bad_value, "2:16", "at most 36500d"},
                      bad_case{"[s3]\npart_size = \"1e300MiB\"\n", errc::bad_value, "2:13", "not a size"},
                      bad_case{"[net]\nconnect_timeout = \"1s\"\n[net\n", errc::malformed, "3:", "expected ']'"}));

TEST_F(fixture, storage_url_is_parsed_as_it_is_loaded) {
  diagnostics diag;
  auto unset = load(options(), diag);
  ASSERT_TRUE(unset) << diag.message;
  EXPECT_FALSE(unset->storage.url);
  EXPECT_FALSE(unset->storage.malformed());
  env["FERRY_STORAGE_URL"] = "s3://bucket/team/prefix/";
  auto c = load(options(), diag);
  ASSERT_TRUE(c) << diag.message;
  ASSERT_TRUE(c->storage.url);
  EXPECT_EQ(c->storage.url->bucket, "bucket");
  EXPECT_EQ(c->storage.url->key, "team/prefix/");
  EXPECT_FALSE(c->storage.malformed());
}

// Not a failed load: commands that need no storage (version, config show) still run with it.
TEST_F(fixture, a_malformed_storage_url_is_refused_naming_file_line_column) {
  const auto file = dir.write("project/ferry.toml", "[storage]\nurl = \"s3://Bad_Bucket/prefix\"\n");
  diagnostics diag;
  auto c = load(options(), diag);
  ASSERT_TRUE(c) << diag.message;
  EXPECT_FALSE(c->storage.url);
  ASSERT_TRUE(c->storage.malformed());
  diagnostics refused;
  EXPECT_EQ(c->storage.refuse(refused), make_error_code(errc::bad_value));
  EXPECT_NE(refused.message.find(file.string() + ":2:7: storage.url: "), std::string::npos) << refused.message;
  EXPECT_NE(refused.message.find("'Bad_Bucket' is not an S3 bucket name"), std::string::npos) << refused.message;
  EXPECT_EQ(c->storage.why.find(file.string()), std::string::npos) << c->storage.why;

  env["FERRY_STORAGE_URL"] = "bucket/prefix";
  auto from_env = load(options(), diag);
  ASSERT_TRUE(from_env) << diag.message;
  EXPECT_EQ(from_env->storage.problem,
            "environment FERRY_STORAGE_URL: storage.url: 'bucket/prefix' is not an s3:// URL (expected s3://BUCKET/KEY)");
}

TEST_F(fixture, a_named_config_file_must_be_readable) {
  auto o = options();
  o.config_file = dir / "missing.toml";
  diagnostics diag;
  auto c = load(o, diag);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), make_error_code(errc::unreadable_file));
  EXPECT_NE(diag.message.find("missing.toml:1:1"), std::string::npos) << diag.message;

  o.config_file = dir.path();  // a directory
  c = load(o, diag);
  ASSERT_FALSE(c);
  EXPECT_NE(diag.message.find("Is a directory"), std::string::npos) << diag.message;
}

TEST_F(fixture, bad_environment_values_name_the_variable) {
  env["FERRY_NET_RETRY_MAX_ATTEMPTS"] = "lots";
  diagnostics diag;
  auto c = load(options(), diag);
  ASSERT_FALSE(c);
  EXPECT_NE(diag.message.find("environment FERRY_NET_RETRY_MAX_ATTEMPTS"), std::string::npos) << diag.message;
  env.erase("FERRY_NET_RETRY_MAX_ATTEMPTS");
  for (const auto* v : {"inf", "nan", "1e300"}) {
    env["FERRY_NET_READ_TIMEOUT"] = v;
    ASSERT_FALSE(load(options(), diag)) << v;
    EXPECT_NE(diag.message.find("environment FERRY_NET_READ_TIMEOUT"), std::string::npos) << diag.message;
  }
}

TEST_F(fixture, a_huge_value_is_never_echoed_whole) {
  dir.write("project/ferry.toml", "[nodes]\nprovider = \"" + std::string(900 << 10, 'x') + "\"\n");
  diagnostics diag;
  ASSERT_FALSE(load(options(), diag));
  EXPECT_LT(diag.message.size(), 1000u);
  EXPECT_NE(diag.message.find("bytes"), std::string::npos) << diag.message.substr(0, 300);
}

TEST_F(fixture, nodes_count_is_checked_alike_from_every_source) {
  diagnostics diag;
  for (const auto* bad : {"0", "100000", "-1", "1001"}) {
    env["FERRY_NODES_COUNT"] = bad;
    auto c = load(options(), diag);
    ASSERT_FALSE(c) << bad;
    EXPECT_EQ(c.error(), make_error_code(errc::bad_value));
    EXPECT_EQ(diag.message, fmt::format("environment FERRY_NODES_COUNT: nodes.count: {} is out of range (1 to {})",
                                        bad, max_node_count));
  }
  env["FERRY_NODES_COUNT"] = "1000";
  auto c = load(options(), diag);
  ASSERT_TRUE(c) << diag.message;
  EXPECT_EQ(c->values.nodes.count, max_node_count);
  env.erase("FERRY_NODES_COUNT");

  dir.write("project/ferry.toml", "[nodes]\ncount = 100000\n");
  ASSERT_FALSE(load(options(), diag));
  EXPECT_EQ(diag.message,
            (dir / "project/ferry.toml").string() + ":2:9: nodes.count: 100000 is out of range (1 to 1000)");
  dir.write("project/ferry.toml", "");
  auto o = options();
  o.flags.push_back({"nodes.count", "0", "--nodes"});
  ASSERT_FALSE(load(o, diag));
  EXPECT_EQ(diag.message, "flag --nodes: nodes.count: 0 is out of range (1 to 1000)");
}

TEST_F(fixture, the_layer_codec_and_its_zstd_level_are_checked_naming_the_file_and_line) {
  diagnostics diag;
  auto c = load(options(), diag);
  ASSERT_TRUE(c) << diag.message;
  EXPECT_EQ(c->values.packaging.codec, "zstd");
  EXPECT_EQ(c->values.packaging.zstd_level, 3);

  dir.write("project/ferry.toml", "[packaging]\ncodec = \"deflate\"\nzstd_level = 19\n");
  c = load(options(), diag);
  ASSERT_TRUE(c) << diag.message;
  EXPECT_EQ(c->values.packaging.codec, "deflate");
  EXPECT_EQ(c->values.packaging.zstd_level, 19);

  dir.write("project/ferry.toml", "[packaging]\nzstd_level = 20\n");
  c = load(options(), diag);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), make_error_code(errc::bad_value));
  EXPECT_EQ(diag.message,
            (dir / "project/ferry.toml").string() + ":2:14: packaging.zstd_level: 20 is out of range (1 to 19)");
  dir.write("project/ferry.toml", "[packaging]\ncodec = \"gzip\"\n");
  c = load(options(), diag);
  ASSERT_FALSE(c);
  EXPECT_EQ(diag.message, (dir / "project/ferry.toml").string() +
                              ":2:9: packaging.codec: 'gzip' is not one of: zstd, deflate");
  dir.write("project/ferry.toml", "");
}

TEST_F(fixture, deadlines_must_be_positive_where_zero_means_nothing) {
  diagnostics diag;
  for (const auto* key : {"FERRY_NET_CONNECT_TIMEOUT", "FERRY_SSH_CONNECT_TIMEOUT", "FERRY_NODES_READY_TIMEOUT",
                          "FERRY_NODES_POLL_INITIAL", "FERRY_AGENT_DOWNLOAD_TIMEOUT",
                          "FERRY_PACKAGING_DISCOVER_TIMEOUT"}) {
    env[key] = "0s";
    auto c = load(options(), diag);
    ASSERT_FALSE(c) << key;
    EXPECT_EQ(c.error(), make_error_code(errc::bad_value));
    EXPECT_TRUE(diag.message.starts_with(fmt::format("environment {}: ", key))) << diag.message;
    EXPECT_TRUE(diag.message.ends_with(": 0s is too short: it must be at least 1ms")) << diag.message;
    env.erase(key);
  }
  dir.write("project/ferry.toml", "[net]\nconnect_timeout = 0\n");
  ASSERT_FALSE(load(options(), diag));
  EXPECT_TRUE(diag.message.starts_with((dir / "project/ferry.toml").string() + ":2:19: net.connect_timeout: "))
      << diag.message;
  // Where the README gives 0 a meaning ("0s: no limit", "0: never"), 0 stays allowed.
  dir.write("project/ferry.toml", "[net]\nread_timeout = \"0s\"\nwrite_timeout = 0\n[nodes]\nidle_timeout = 0\n"
                                  "[packaging]\nstale_upload_age = \"0s\"\n");
  auto c = load(options(), diag);
  ASSERT_TRUE(c) << diag.message;
  EXPECT_EQ(c->values.net.read_timeout.count(), 0);
}

TEST_F(fixture, an_oversize_file_is_refused_before_it_is_parsed) {
  std::string tables;
  for (int i = 0; tables.size() <= max_config_file_size; ++i) tables += fmt::format("[t{}]\n", i);
  dir.write("project/ferry.toml", tables);
  diagnostics diag;
  auto c = load(options(), diag);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), make_error_code(errc::too_large));
  EXPECT_EQ(diag.message, (dir / "project/ferry.toml").string() +
                              ": larger than 1MiB, the most a configuration file may hold; it is not read");
  // Just under the limit, a file is read (here: comments).
  dir.write("project/ferry.toml", std::string(max_config_file_size - 1, '#'));
  EXPECT_TRUE(load(options(), diag)) << diag.message;
}

TEST(schema, every_default_parses_and_every_key_is_sectioned) {
  for (const auto& key : schema()) {
    EXPECT_NE(key.name.find('.'), std::string_view::npos) << key.name;
    EXPECT_FALSE(key.help.empty()) << key.name;
    EXPECT_EQ(find_key(key.name), &key);
  }
}

// docs/configuration.md has a row for every key, as the schema has it: name, default and help. On a
// failure the rows that are missing are printed, ready to paste.
TEST(schema, every_key_has_its_row_in_the_reference_of_docs_configuration) {
  std::ifstream in(std::string(FERRY_SOURCE_DIR) + "/docs/configuration.md");
  ASSERT_TRUE(in) << "docs/configuration.md";
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string missing;
  for (const auto& key : schema()) {
    std::string help(key.help);
    for (std::size_t at = 0; (at = help.find('|', at)) != std::string::npos; at += 2) help.insert(at, "\\");
    const auto row = fmt::format("| `{}` | `{}` | {} |\n", key.name, key.default_value, help);
    if (page.find(row) == std::string::npos) missing += row;
  }
  EXPECT_EQ(missing, "") << "rows missing from docs/configuration.md:\n" << missing;
}

}  // namespace
}  // namespace ferry::config
