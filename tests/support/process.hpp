#pragma once
// Running real programs from tests: ferry itself, python3 with eliot, git, the aws CLI.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ferry::test {

struct process_result {
  int exit_code = -1;  // 128 + N when killed by signal N
  std::string out;
  std::string err;
};

struct process_options {
  std::map<std::string, std::string> env;    // added to (or replacing in) the current environment
  std::vector<std::string> unset_env;        // removed from it
  std::optional<std::filesystem::path> cwd;
  std::string input;                          // written to stdin, then closed
};

// Runs argv[0] (looked up on PATH) to completion, capturing both streams.
process_result run(const std::vector<std::string>& argv, const process_options& options = {});

// Runs the ferry binary under test.
process_result run_ferry(const std::vector<std::string>& args, const process_options& options = {});

// The python3 that ships Debian's python3-eliot.
inline const char* system_python = "/usr/bin/python3";

}  // namespace ferry::test
