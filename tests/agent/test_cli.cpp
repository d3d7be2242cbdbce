// The ferry binary as a user meets it: options, exit codes, configuration errors, traces.
#include "support/eliot.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <regex>
#include <sstream>

namespace ferry {
namespace {

using test::run_ferry;
using test::temp_dir;

// A line of test::flatten's answer: an action of `type` that ended as `status`, `depth` levels down.
std::string ended(std::string_view type, std::string_view status, int depth = 0) {
  return fmt::format("{:{}}{}:{}", "", depth * 2, type, status);
}

// Every test gets its own HOME and XDG dirs, so nothing from the machine leaks in.
struct cli : ::testing::Test {
  temp_dir dir;
  test::process_options opts;

  void SetUp() override {
    std::filesystem::create_directories(dir / "work");
    opts.cwd = dir / "work";
    test::use_home(opts, dir.path());
    opts.unset_env = {"FERRY_TASK_ID", "FERRY_STORAGE_URL", "FERRY_PROVIDER"};
  }
};

TEST_F(cli, version_and_help_exit_zero) {
  auto r = run_ferry({"version"}, opts);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ferry 0."), std::string::npos);
  for (auto args : std::vector<std::vector<std::string>>{
           {"--help"}, {"config", "--help"}, {"config", "show", "--help"}, {"trace", "tree", "--help"},
           {"trace", "chrome", "--help"}, {"version", "--help"}}) {
    r = run_ferry(args, opts);
    EXPECT_EQ(r.exit_code, 0) << args[0];
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << r.out;
  }
}

TEST_F(cli, usage_errors_exit_two) {
  for (auto args : std::vector<std::vector<std::string>>{
           {}, {"frobnicate"}, {"config"}, {"config", "show", "--bogus"}, {"trace"}, {"pack", "--explain"}}) {
    const auto r = run_ferry(args, opts);
    EXPECT_EQ(r.exit_code, 2) << (args.empty() ? "(none)" : args[0]) << r.err;
    EXPECT_NE(r.err.find("ferry: error:"), std::string::npos) << r.err;
  }
}

TEST_F(cli, help_shows_examples_and_describes_every_command_in_one_style) {
  const auto r = run_ferry({"--help"}, opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Examples:\n  ferry "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ferry map --range"), std::string::npos) << r.out;
  // Each command's line in every list of commands: its name, then its description, lower case first.
  std::vector<std::vector<std::string>> lists = {{"--help"}};
  for (const char* group : {"config", "trace", "storage", "nodes", "cluster"}) lists.push_back({group, "--help"});
  std::size_t described = 0;
  for (const auto& args : lists) {
    const auto help = run_ferry(args, opts);
    ASSERT_EQ(help.exit_code, 0) << args[0] << help.err;
    const auto at = help.out.find("Subcommands:");
    ASSERT_NE(at, std::string::npos) << help.out;
    std::istringstream lines(help.out.substr(at));
    std::string line;
    std::getline(lines, line);
    static const std::regex command_line(R"(^  ([a-z-]+) +(.)(.*)$)");
    while (std::getline(lines, line) && !line.empty()) {
      std::smatch m;
      if (!std::regex_match(line, m, command_line)) continue;
      ++described;
      EXPECT_FALSE(std::isupper(static_cast<unsigned char>(m[2].str()[0]))) << args[0] << ": " << line;
    }
  }
  EXPECT_GE(described, 20u);
}

TEST_F(cli, a_command_that_ships_the_project_without_storage_url_is_a_configuration_error) {
  for (auto args : std::vector<std::vector<std::string>>{
           {"run", "--", "true"}, {"map", "--range", "1..2", "--", "true"}, {"warmup"}, {"pack"}}) {
    const auto r = run_ferry(args, opts);
    EXPECT_EQ(r.exit_code, 2) << args[0] << r.err;
    EXPECT_NE(r.err.find("storage.url is not set"), std::string::npos) << args[0] << r.err;
  }
}

// Parsed once as the configuration is loaded, refused by each command that needs storage as the configuration
// error it is, naming where it was set; commands that need no storage still run.
TEST_F(cli, a_malformed_storage_url_is_a_configuration_error_naming_its_file_line) {
  dir.write("work/ferry.toml", "[storage]\nurl = \"s3://Bad_Bucket/p\"\n");
  for (auto args : std::vector<std::vector<std::string>>{{"run", "--", "true"},
                                                         {"map", "--range", "1..2", "--", "true"},
                                                         {"warmup"},
                                                         {"pack"},
                                                         {"pack", "--dry-run"},
                                                         {"storage", "gc"}}) {
    const auto r = run_ferry(args, opts);
    EXPECT_EQ(r.exit_code, 2) << args[0] << r.err;
    EXPECT_NE(r.err.find("ferry.toml:2:7: storage.url: 's3://Bad_Bucket/p': 'Bad_Bucket' is not an S3 bucket name"),
              std::string::npos)
        << args[0] << r.err;
  }
  for (auto args : std::vector<std::vector<std::string>>{{"version"}, {"config", "show"}}) {
    const auto r = run_ferry(args, opts);
    EXPECT_EQ(r.exit_code, 0) << args[0] << r.err;
  }
}

TEST_F(cli, storage_gc_without_storage_url_is_a_configuration_error) {
  const auto r = run_ferry({"storage", "gc"}, opts);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("storage.url is not set"), std::string::npos) << r.err;
}

TEST_F(cli, global_options_work_before_and_after_the_command) {
  const auto a = run_ferry({"--trace", (dir / "a.jsonl").string(), "config", "show"}, opts);
  const auto b = run_ferry({"config", "show", "--trace", (dir / "b.jsonl").string()}, opts);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  for (const auto* name : {"a.jsonl", "b.jsonl"}) {
    const auto tasks = test::eliot_parse({dir / name});
    ASSERT_EQ(tasks.size(), 1u) << name;
    EXPECT_TRUE(tasks[0].at("complete").as_bool());
    EXPECT_EQ(test::flatten(tasks[0].at("root")),
              (std::vector<std::string>{ended(action_types::cli::config_show, "succeeded"),
                                        ended(action_types::cli::config_load, "succeeded", 1)}));
  }
}

TEST_F(cli, without_trace_flag_the_trace_goes_to_the_state_dir_and_verbose_names_it) {
  const auto r = run_ferry({"-v", "version"}, opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("trace: (\\S+\\.jsonl)"))) << r.err;
  const std::filesystem::path path = m[1].str();
  EXPECT_EQ(path.parent_path(), dir / "state" / "ferry" / "traces");
  EXPECT_TRUE(test::eliot_parse({path})[0].at("complete").as_bool());
  const auto quiet = run_ferry({"version"}, opts);
  EXPECT_EQ(quiet.err, "");
}

TEST_F(cli, config_show_says_where_each_value_came_from) {
  dir.write("work/ferry.toml", "[storage]\nurl = \"s3://b/p\"\n");
  dir.write("config/ferry/config.toml", "[ssh]\nuser = \"admin\"\n");
  auto o = opts;
  o.env["FERRY_NET_CONNECT_TIMEOUT"] = "3s";
  const auto r = run_ferry({"config", "show"}, o);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("storage\\.url = \"s3://b/p\" +# \\./ferry\\.toml:2:7|"
                                                  "storage\\.url = \"s3://b/p\" +# ferry\\.toml:2:7|"
                                                  "storage\\.url = \"s3://b/p\" +# .*/work/ferry\\.toml:2:7")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("ssh\\.user = \"admin\" +# .*config/ferry/config\\.toml:2:8")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("net\\.connect_timeout = \"3s\" +# environment FERRY_NET_CONNECT_TIMEOUT")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("nodes\\.provider = \"local\" +# default"))) << r.out;
}

TEST_F(cli, bad_configuration_exits_two_naming_file_line_column_and_is_traced) {
  const struct {
    std::string content;
    std::string expected;
  } cases[] = {
      {"[net]\nconnect_timout = \"1s\"\n", "bad.toml:2:1: unknown key 'net.connect_timout'"},
      {"[net]\nconnect_timeout = true\n", "bad.toml:2:19: net.connect_timeout: expected a duration"},
      {"[net\n", "bad.toml:1:"},
  };
  for (const auto& c : cases) {
    const auto file = dir.write("bad.toml", c.content);
    const auto trace = dir / "bad.jsonl";
    std::filesystem::remove(trace);
    const auto r = run_ferry({"--config", file.string(), "config", "show", "--trace", trace.string()}, opts);
    EXPECT_EQ(r.exit_code, 2) << c.content;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
    const auto tasks = test::eliot_parse({trace});
    ASSERT_EQ(tasks.size(), 1u);
    EXPECT_TRUE(tasks[0].at("complete").as_bool());
    EXPECT_EQ(test::flatten(tasks[0].at("root")),
              (std::vector<std::string>{ended(action_types::cli::config_show, "failed"),
                                        ended(action_types::cli::config_load, "failed", 1)}));
  }
  const auto missing = run_ferry({"--config", (dir / "nope.toml").string(), "config", "show"}, opts);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.toml:1:1: cannot read configuration file: No such file"), std::string::npos)
      << missing.err;
}

TEST_F(cli, a_malformed_task_id_is_a_usage_error) {
  auto o = opts;
  o.env["FERRY_TASK_ID"] = "not-a-task";
  const auto r = run_ferry({"version"}, o);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("FERRY_TASK_ID"), std::string::npos) << r.err;
}

TEST_F(cli, ferry_continues_the_task_of_a_python_orchestrator_and_trace_tree_merges_both) {
  const auto python_trace = dir / "python.jsonl";
  const auto ferry_trace = dir / "ferry.jsonl";
  const auto r = test::run({test::system_python, test::peer_script("eliot_parent.py"), python_trace.string(),
                            FERRY_BINARY, "config", "show", "--trace", ferry_trace.string()},
                           opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto tasks = test::eliot_parse({python_trace, ferry_trace});
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].at("complete").as_bool());
  EXPECT_EQ(test::flatten(tasks[0].at("root")),
            (std::vector<std::string>{"python:orchestrate:succeeded",
                                      ended(action_types::cli::config_show, "succeeded", 1),
                                      ended(action_types::cli::config_load, "succeeded", 2)}));

  const auto tree = run_ferry({"trace", "tree", python_trace.string(), ferry_trace.string()}, opts);
  ASSERT_EQ(tree.exit_code, 0) << tree.err;
  const auto uuid = std::string(tasks[0].at("uuid").as_string());
  EXPECT_EQ(tree.out.rfind(uuid + "\n", 0), 0u) << tree.out;
  EXPECT_EQ(tree.out.find("incomplete"), std::string::npos) << tree.out;
  const auto orchestrate = tree.out.find("└── python:orchestrate/1 ⇒ started");
  const auto show = tree.out.find(fmt::format("    ├── {}/2/1 ⇒ started", action_types::cli::config_show));
  const auto load = tree.out.find(fmt::format("    │   ├── {}/2/2/1 ⇒ started", action_types::cli::config_load));
  const auto end = tree.out.find("    └── python:orchestrate/3 ⇒ succeeded");
  EXPECT_NE(orchestrate, std::string::npos) << tree.out;
  EXPECT_NE(show, std::string::npos) << tree.out;
  EXPECT_NE(load, std::string::npos) << tree.out;
  EXPECT_NE(end, std::string::npos) << tree.out;
  EXPECT_TRUE(orchestrate < show && show < load && load < end) << tree.out;
}

// The names `help` lists under "Subcommands:".
std::vector<std::string> subcommands_in(const std::string& help) {
  std::vector<std::string> out;
  const auto at = help.find("Subcommands:\n");
  if (at == std::string::npos) return out;
  std::istringstream lines(help.substr(at + 13));
  for (std::string line; std::getline(lines, line) && line.starts_with("  ");) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    out.push_back(name);
  }
  return out;
}

// Every command a user can name, as the help screens list them: {"pack"}, {"nodes", "up"}, ...
std::vector<std::vector<std::string>> every_command(const test::process_options& opts,
                                                    const std::vector<std::string>& prefix = {}) {
  auto help_args = prefix;
  help_args.push_back("--help");
  const auto help = run_ferry(help_args, opts);
  std::vector<std::vector<std::string>> out;
  for (const auto& name : subcommands_in(help.out)) {
    auto command = prefix;
    command.push_back(name);
    auto below = every_command(opts, command);
    if (below.empty()) out.push_back(command);
    out.insert(out.end(), below.begin(), below.end());
  }
  return out;
}

TEST_F(cli, an_unknown_option_is_a_usage_error_naming_it_in_every_command) {
  const auto commands = every_command(opts);
  ASSERT_GT(commands.size(), 20u);  // the help screens were read
  const auto trace = dir / "t.jsonl";
  for (auto args : commands) {
    const auto name = fmt::format("{}", fmt::join(args, " "));
    args.insert(args.begin(), {"--trace", trace.string()});
    args.push_back("--frob");
    const auto r = run_ferry(args, opts);
    EXPECT_EQ(r.exit_code, 2) << name << ": " << r.err;
    EXPECT_NE(r.err.find(fmt::format("unknown option '--frob' for 'ferry {}'", name)), std::string::npos)
        << name << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(trace)) << name << " started";
  }
}

// Nothing runs but what follows `--`: an unknown option before it is not the start of a command. The
// command would leave a mark (local nodes share this file system), and any command that starts writes its
// trace: neither may appear. No nodes are needed, since the usage error comes before anything starts.
TEST_F(cli, before_the_double_dash_an_unknown_option_is_a_usage_error_and_nothing_runs) {
  const auto marker = dir / "ran";
  const auto trace = dir / "t.jsonl";
  for (const auto& command : std::vector<std::vector<std::string>>{
           {"run"}, {"exec"}, {"map", "--range", "1..2"}, {"cluster", "run"}, {"run", "--nodes", "1"}}) {
    const auto name = fmt::format("{}", fmt::join(command, " "));
    for (const auto& extra : std::vector<std::vector<std::string>>{{"--frob", "--"}, {"--frob"}, {}}) {
      std::vector<std::string> args{"--trace", trace.string()};
      args.insert(args.end(), command.begin(), command.end());
      args.insert(args.end(), extra.begin(), extra.end());
      args.insert(args.end(), {"touch", marker.string()});  // without `--`, not a command either
      const auto r = run_ferry(args, opts);
      EXPECT_EQ(r.exit_code, 2) << name << " " << fmt::format("{}", fmt::join(extra, " ")) << ": " << r.err;
      if (!extra.empty()) {
        EXPECT_NE(r.err.find("'--frob'"), std::string::npos) << name << ": " << r.err;
      }
      EXPECT_FALSE(std::filesystem::exists(trace)) << name << " started";
      EXPECT_FALSE(std::filesystem::exists(marker)) << name << " ran a command";
    }
  }
}

TEST_F(cli, an_unknown_command_is_named_with_a_did_you_mean) {
  auto r = run_ferry({"frobnicate"}, opts);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'frobnicate' is not a command of 'ferry' (commands: version, config,"), std::string::npos)
      << r.err;
  r = run_ferry({"pakc"}, opts);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'pakc' is not a command of 'ferry' (did you mean 'pack'?)"), std::string::npos) << r.err;
  r = run_ferry({"nodes", "lss"}, opts);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'lss' is not a command of 'ferry nodes' (did you mean 'ls'?)"), std::string::npos) << r.err;
}

TEST_F(cli, nodes_count_from_the_environment_has_the_bounds_of_the_nodes_flag) {
  for (const auto* count : {"0", "100000"}) {
    auto o = opts;
    o.env["FERRY_NODES_COUNT"] = count;
    const auto r = run_ferry({"config", "show"}, o);
    EXPECT_EQ(r.exit_code, 2) << count << ": " << r.out;
    EXPECT_NE(r.err.find(fmt::format("environment FERRY_NODES_COUNT: nodes.count: {} is out of range (1 to 1000)",
                                     count)),
              std::string::npos)
        << r.err;
    const auto flag = run_ferry({"run", "--nodes", count, "--", "true"}, opts);
    EXPECT_EQ(flag.exit_code, 2) << count << ": " << flag.err;
    EXPECT_NE(flag.err.find("--nodes"), std::string::npos) << flag.err;
  }
}

TEST_F(cli, a_zero_connect_timeout_and_an_oversize_file_are_configuration_errors) {
  dir.write("work/ferry.toml", "[net]\nconnect_timeout = \"0s\"\n");
  auto r = run_ferry({"config", "show"}, opts);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("ferry.toml:2:19: net.connect_timeout: 0s is too short: it must be at least 1ms"),
            std::string::npos)
      << r.err;

  std::string tables;
  while (tables.size() < (2u << 20)) tables += fmt::format("[t{}]\n", tables.size());
  dir.write("work/ferry.toml", tables);
  r = run_ferry({"config", "show"}, opts);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("ferry.toml: larger than 1MiB, the most a configuration file may hold"), std::string::npos)
      << r.err;
}

TEST_F(cli, a_node_registry_that_is_a_directory_says_how_to_fix_it) {
  std::filesystem::create_directories(dir / "state" / "ferry" / "nodes.json");
  const auto r = run_ferry({"nodes", "ls"}, opts);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("nodes.json is a directory; ferry keeps its registry of nodes in a file of that name. Move "
                       "the directory away"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace ferry
