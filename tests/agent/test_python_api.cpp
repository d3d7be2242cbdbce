// The Python API (`import ferry`, docs/python-api.md) end to end: a user's script, run by a venv of Debian's
// python3 that holds Debian's cloudpickle and nothing else (so that what ferry packs stays small), imports
// the package from this source tree, whose agent is the ferry binary under test; the tasks run on local
// nodes, against moto_server as storage. Each test checks what the user sees (the script's output and exit)
// and what is left behind (processes, uploads, the trace, storage's requests).
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include "local_run.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <csignal>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// Python's repr of a list of integers.
std::string py_list(const std::vector<long long>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

template <typename F>
std::vector<long long> values(long long n, F f) {
  std::vector<long long> out;
  for (long long i = 0; i < n; ++i) out.push_back(f(i));
  return out;
}

class python_api : public local_nodes {
 protected:
  python_api() : local_nodes("ferry-api") {}

  // One venv for every test: Debian's python3 without pip, and a copy of Debian's cloudpickle (not all of
  // dist-packages, which is 164 MB to pack).
  static void SetUpTestSuite() {
    if (!can_make_local_nodes()) return;
    venv_home_ = new temp_dir;
    const auto site = make_venv(*venv_home_ / "venv", venv_error_);
    if (site.empty()) return;
    std::error_code ec;
    fs::copy("/usr/lib/python3/dist-packages/cloudpickle", site / "cloudpickle", fs::copy_options::recursive, ec);
    if (ec) venv_error_ = "cannot copy Debian's cloudpickle (python3-cloudpickle): " + ec.message();
  }
  static void TearDownTestSuite() {
    delete venv_home_;
    venv_home_ = nullptr;
  }

  void SetUp() override {
    local_nodes::SetUp();
    if (!moto_) return;
    ASSERT_TRUE(venv_error_.empty()) << venv_error_;
    write_file(project() / ".gitignore", "__pycache__/\n");
  }

  static fs::path python() { return *venv_home_ / "venv" / "bin" / "python"; }

  // How the user runs a script: the package from this tree, the ferry binary under test, in project().
  process_options script_env() const {
    auto o = env();
    o.env["PYTHONPATH"] = (fs::path(FERRY_SOURCE_DIR) / "python").string();
    o.env["FERRY_BIN"] = FERRY_BINARY;
    return o;
  }

  process_result run_script(const std::string& name, const std::string& text, const process_options& o,
                            std::vector<std::string> args = {}) const {
    write_file(project() / name, text);
    std::vector<std::string> argv = {python().string(), name};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, o);
  }

  // `count` nodes up, each with the workstation's project hidden from it behind an empty file system (local
  // nodes share this machine's files; a real node could never read the workstation's project).
  void nodes_up_without_the_project(int count) {
    ASSERT_EQ(run_ferry({"nodes", "up", std::to_string(count)}, env()).exit_code, 0);
    int masked = 0;
    for (const auto& pid : node_namespace_pids()) {
      const auto r = run({"nsenter", "-t", pid, "-m", "mount", "-t", "tmpfs", "tmpfs", project().string()});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      ++masked;
    }
    ASSERT_EQ(masked, count);
  }

  // A process in each local node's mount namespace, for nsenter.
  std::vector<std::string> node_namespace_pids() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(home_ / "state" / "ferry" / "local")) {
      if (!e.is_directory()) continue;
      const auto ns = read_file(e.path() / "mnt_ns");
      const auto pid = process_in_mount_namespace(ns.substr(0, ns.find('\n')));
      EXPECT_FALSE(pid.empty()) << "no process holds the mount namespace of " << e.path();
      if (!pid.empty()) out.push_back(pid);
    }
    return out;
  }

  static std::string process_in_mount_namespace(const std::string& ns) {
    for (const auto& e : fs::directory_iterator("/proc")) {
      const auto name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::error_code ec;
      if (fs::read_symlink(e.path() / "ns" / "mnt", ec).string() == ns && !ec) return name;
    }
    return {};
  }

  // The trace of the one `ferry api` the test ran: the package passes no --trace, so it is in the state dir.
  fs::path api_trace() const {
    std::vector<fs::path> found;
    const auto dir = home_ / "state" / "ferry" / "traces";
    if (fs::exists(dir)) {
      for (const auto& e : fs::directory_iterator(dir)) {
        const auto name = e.path().filename().string();
        if (name.ends_with("-ferry-api.jsonl")) found.push_back(e.path());
      }
    }
    EXPECT_EQ(found.size(), 1u) << "traces of ferry api in " << dir;
    return found.empty() ? fs::path() : found.front();
  }

  static temp_dir* venv_home_;
  static std::string venv_error_;
};

temp_dir* python_api::venv_home_ = nullptr;
std::string python_api::venv_error_;

TEST_F(python_api, a_lambda_a_closure_and_a_function_of_main_run_on_nodes) {
  auto o = script_env();
  o.env["FERRY_NODES_MAX_NODES"] = "2";
  const auto r = run_script("closures.py",
                            "import time, ferry\n"
                            "\n"
                            "def square(x):\n"
                            "    time.sleep(0.05 if x % 4 == 0 else 0)  # later than the ones after it\n"
                            "    return x * x\n"
                            "\n"
                            "def shout(x):\n"
                            "    print('hello from task', x)\n"
                            "    return x\n"
                            "\n"
                            "def make_adder(n):\n"
                            "    def add(x):\n"
                            "        return x + n\n"
                            "    return add\n"
                            "\n"
                            "with ferry.Executor(nodes=2) as ex:\n"
                            "    print('lambda', list(ex.map(lambda x: x * 3, range(20))))\n"
                            "    print('closure', list(ex.map(make_adder(100), range(20), chunksize=1)))\n"
                            "    print('main', list(ex.map(square, range(20), chunksize=1)))\n"
                            "    print('shout', ex.submit(shout, 7).result())\n"
                            "print('ferry.map', list(ferry.map(square, range(30), nodes=2)))\n"
                            "print('unordered', sorted(ferry.map(lambda x: x - 1, range(30), ordered=False, nodes=2,\n"
                            "                                    chunksize=1)))\n",
                            o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto square = [](long long x) { return x * x; };
  EXPECT_EQ(r.out, fmt::format("lambda {}\nclosure {}\nmain {}\nshout 7\nferry.map {}\nunordered {}\n",
                               py_list(values(20, [](long long x) { return 3 * x; })),
                               py_list(values(20, [](long long x) { return x + 100; })), py_list(values(20, square)),
                               py_list(values(30, square)), py_list(values(30, [](long long x) { return x - 1; }))));
  // A task's print reaches the local stderr, prefixed by its node and its task (the first submit: #0).
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"((^|\n)\[local-\S+ #0\] hello from task 7\n)"))) << r.err;
}


TEST_F(python_api, the_users_own_exception_is_caught_with_the_remote_traceback_as_its_cause) {
  const auto r = run_script("raises.py",
                            "import ferry\n"
                            "\n"
                            "class MyError(Exception):\n"
                            "    pass\n"
                            "\n"
                            "def boom_on_node(x):\n"
                            "    raise MyError('bad input %d' % x)\n"
                            "\n"
                            "with ferry.Executor(nodes=1) as ex:\n"
                            "    try:\n"
                            "        ex.submit(boom_on_node, 3).result()\n"
                            "    except MyError as e:\n"
                            "        print('caught', type(e) is MyError, e)\n"
                            "        print('cause', type(e.__cause__).__name__)\n"
                            "        print(e.__cause__)\n",
                            script_env());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(r.out.starts_with("caught True bad input 3\ncause RemoteTraceback\n")) << r.out;
  // The cause is the traceback on the node: the function's frame and the line that raised.
  EXPECT_TRUE(contains(r.out, ", in boom_on_node\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "raise MyError('bad input %d' % x)")) << r.out;
}

}  // namespace
}  // namespace ferry::test
