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
    for (const auto& [dir, pid] : node_mount_namespaces(home_.path())) {
      EXPECT_FALSE(pid.empty()) << "no process holds the mount namespace of " << dir;
      if (!pid.empty()) out.push_back(pid);
    }
    return out;
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


TEST_F(python_api, a_workspace_function_imports_a_module_that_only_the_shipped_workspace_holds) {
  // wslib is the workspace's own package, on no path of the venv. Its function is pickled by reference and
  // imported on the node, where the workstation's project is hidden: only the shipped layer can serve it.
  write_file(project() / "wslib" / "__init__.py", "");
  write_file(project() / "wslib" / "helper.py", "VALUE = 'shipped'\n");
  write_file(project() / "wslib" / "tasks.py",
             fmt::format("import os\n"
                         "\n"
                         "def where(x):\n"
                         "    from wslib import helper\n"
                         "    return x, helper.VALUE, helper.__file__, os.path.exists({:?})\n",
                         (project() / "wslib" / "helper.py").string()));
  auto o = script_env();
  o.env["FERRY_NODES_MAX_NODES"] = "2";
  ASSERT_NO_FATAL_FAILURE(nodes_up_without_the_project(2));
  const auto r = run_script("workspace.py",
                            "import ferry\n"
                            "from wslib.tasks import where\n"
                            "\n"
                            "with ferry.Executor(nodes=2) as ex:\n"
                            "    for r in ex.map(where, range(4), chunksize=1):\n"
                            "        print(*r)\n",
                            o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  for (; std::getline(lines, line); ++n) {
    std::istringstream words(line);
    std::string index, value, file, visible;
    words >> index >> value >> file >> visible;
    EXPECT_EQ(index, std::to_string(n)) << r.out;
    EXPECT_EQ(value, "shipped") << line;
    EXPECT_TRUE(file.ends_with("/wslib/helper.py")) << line;
    EXPECT_FALSE(file.starts_with(project().string())) << line;
    EXPECT_EQ(visible, "False") << "the node could read the workstation's project: " << line;
  }
  EXPECT_EQ(n, 4) << r.out;
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

TEST_F(python_api, a_node_ended_mid_map_leaves_every_result_once_and_in_order) {
  auto o = script_env();
  o.env["FERRY_NODES_MAX_NODES"] = "2";  // no replacement: the other node must take the lost one's tasks
  ASSERT_EQ(run_ferry({"nodes", "up", "2"}, o).exit_code, 0);
  const auto marks = home_ / "marks";
  fs::create_directories(marks);
  // Each task marks where it runs (sshd's SSH_CONNECTION names the node's own address), then takes a while.
  write_file(project() / "lost.py",
             "import os, sys, time, ferry\n"
             "MARKS = sys.argv[1]\n"
             "\n"
             "def task(x):\n"
             "    mark = os.path.join(MARKS, '%d.%d' % (x, os.getpid()))\n"
             "    with open(mark + '.tmp', 'w') as f:\n"
             "        f.write(os.environ.get('SSH_CONNECTION', '') + '\\n')\n"
             "    os.rename(mark + '.tmp', mark)\n"
             "    time.sleep(1)\n"
             "    return x * 10\n"
             "\n"
             "with ferry.Executor(nodes=2, concurrency=2, retries=2) as ex:\n"
             "    for r in ex.map(task, range(12), chunksize=1):\n"
             "        print(r, flush=True)\n");
  auto c = spawn({python().string(), "lost.py", marks.string()}, o);
  // Once tasks run, end a node that runs one.
  std::string where;
  for (int i = 0; i < 1200 && where.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (const auto& e : fs::directory_iterator(marks))
      if (e.path().extension() != ".tmp") where += read_file(e.path());
  }
  ASSERT_FALSE(where.empty()) << "no task ever started: " << c->wait().err;
  const auto victim = node_named_by_address(home_.path(), where);
  ASSERT_FALSE(victim.empty()) << "no node's address in the marks: " << where;
  EXPECT_EQ(run_ferry({"nodes", "down", victim}, o).exit_code, 0);
  const auto r = c->wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0\n10\n20\n30\n40\n50\n60\n70\n80\n90\n100\n110\n") << r.err;
  // The node went while it ran tasks: they went again elsewhere.
  EXPECT_TRUE(contains(read_file(api_trace()), action_types::api::retry)) << "no task of the lost node went again";
}

TEST_F(python_api, ctrl_c_raises_keyboard_interrupt_and_leaves_nothing_behind) {
  const auto pids = home_ / "pids";
  fs::create_directories(pids);
  write_file(project() / "interrupted.py",
             "import os, sys, time, ferry\n"
             "PIDS = sys.argv[1]\n"
             "\n"
             "def sleeper(x):\n"
             "    path = os.path.join(PIDS, str(x))\n"
             "    with open(path + '.tmp', 'w') as f:\n"
             "        f.write('%d\\n' % os.getpid())\n"
             "    os.rename(path + '.tmp', path)\n"
             "    time.sleep(300)\n"
             "    return x\n"
             "\n"
             "try:\n"
             "    with ferry.Executor(nodes=1, concurrency=2) as ex:\n"
             "        print(list(ex.map(sleeper, range(2), chunksize=1)))\n"
             "except KeyboardInterrupt:\n"
             "    print('KeyboardInterrupt', flush=True)\n"
             "    raise\n");
  // In a session of its own, as a terminal starts it: Ctrl-C goes to its whole process group.
  auto c = spawn({"setsid", python().string(), "interrupted.py", pids.string()}, script_env());
  // A worker takes the next tasks ahead of the one it runs: the second may wait behind the first.
  std::vector<pid_t> remote;
  for (int i = 0; i < 1200 && remote.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (fs::exists(pids / "0")) remote.push_back(read_pid(pids / "0"));
  }
  ASSERT_EQ(::getpgid(c->pid()), c->pid()) << "the script does not lead its own process group";
  if (remote.empty()) ::kill(-c->pid(), SIGKILL);
  ASSERT_FALSE(remote.empty()) << "the task never started: " << c->wait().err;
  ::kill(-c->pid(), SIGINT);
  const auto r = c->wait();
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << r.out << r.err;
  EXPECT_EQ(r.out, "KeyboardInterrupt\n") << r.err;
  EXPECT_TRUE(contains(r.err, "\nKeyboardInterrupt\n")) << r.err;
  // The remote tasks are gone.
  if (fs::exists(pids / "1")) remote.push_back(read_pid(pids / "1"));
  for (const auto pid : remote) {
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {
      gone = dead_or_zombie(pid);
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(gone) << "task process " << pid << " is still there";
  }
  // No upload is left open in storage.
  const auto uploads = moto_->aws({"s3api", "list-multipart-uploads", "--bucket", bucket()});
  ASSERT_EQ(uploads.exit_code, 0) << uploads.err;
  EXPECT_FALSE(contains(uploads.out, "UploadId")) << uploads.out;
  // The agent's trace ends every action it began, its job's failed.
  const auto trace = api_trace();
  ASSERT_FALSE(trace.empty());
  auto lines = trace_file_lines(trace);
  for (auto& m : node_lines(trace)) lines.push_back(std::move(m));
  std::map<std::string, std::string> open;
  for (const auto& m : lines) {
    if (!m.contains("action_type")) continue;
    const auto status = trace_text(m, "action_status");
    if (status == "started") {
      open[trace_action_key(m)] = trace_type(m);
    } else {
      open.erase(trace_action_key(m));
    }
  }
  for (const auto& [key, type] : open) ADD_FAILURE() << "never ended: " << type << " " << key;
  const auto parsed = run({system_python, (fs::path(FERRY_SOURCE_DIR) / "tests/peers/eliot_check.py").string(),
                           trace.string()});
  ASSERT_EQ(parsed.exit_code, 0) << parsed.err;
  const auto tasks = json::parse(parsed.out).as_array();
  ASSERT_EQ(tasks.size(), 1u) << parsed.out;
  EXPECT_EQ(tasks[0].at("root").at("action_type").as_string(), action_types::api::job) << parsed.out;
  EXPECT_EQ(tasks[0].at("root").at("status").as_string(), "failed") << parsed.out;
}

TEST_F(python_api, a_generator_of_a_million_items_goes_through_in_bounded_memory) {
  const auto r = run_script("million.py",
                            "import ferry\n"
                            "\n"
                            "def items(n):\n"
                            "    for i in range(n):\n"
                            "        yield i\n"
                            "\n"
                            "count = total = 0\n"
                            "for r in ferry.map(lambda x: x, items(1000000), nodes=1):\n"
                            "    count += 1\n"
                            "    total += r\n"
                            "print(count, total)\n"
                            "# VmHWM, not getrusage's ru_maxrss: Linux carries the spawning process's peak over exec,\n"
                            "# and this test's spawner is large.\n"
                            "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')))\n",
                            script_env());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::istringstream out(r.out);
  long long count = 0, total = 0, max_rss_kib = 0;
  out >> count >> total >> max_rss_kib;
  EXPECT_EQ(count, 1000000) << r.out;
  EXPECT_EQ(total, 499999500000) << r.out;
  EXPECT_GT(max_rss_kib, 0) << r.out;
  EXPECT_LT(max_rss_kib, 100 * 1024) << "the client's peak RSS, KiB";
  RecordProperty("client_max_rss_kib", std::to_string(max_rss_kib));
}

TEST_F(python_api, as_completed_over_submitted_futures_gets_every_result) {
  const auto r = run_script("completed.py",
                            "import concurrent.futures, time, ferry\n"
                            "\n"
                            "def cube(x):\n"
                            "    time.sleep(0.05 * (x % 3))\n"
                            "    return x ** 3\n"
                            "\n"
                            "with ferry.Executor(nodes=2) as ex:\n"
                            "    futures = {ex.submit(cube, i): i for i in range(16)}\n"
                            "    got = {}\n"
                            "    for f in concurrent.futures.as_completed(futures, timeout=300):\n"
                            "        got[futures[f]] = f.result()\n"
                            "print(len(got), [got[i] for i in sorted(got)])\n",
                            script_env());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, fmt::format("16 {}\n", py_list(values(16, [](long long x) { return x * x * x; }))));
}

// One failure does not abort the map (return_exceptions), and a task's own exception of a retry_on type
// goes again: each task that raises Flaky does so once (a mark beside the test says it did), then succeeds.
TEST_F(python_api, return_exceptions_keeps_the_map_going_and_retry_on_sends_a_flaky_task_again) {
  const auto marks = home_ / "marks";
  fs::create_directories(marks);
  const std::string script =
      "import os, sys, ferry\n"
      "\n"
      "MARKS = sys.argv[1]  # a global of __main__: it travels with the function\n"
      "\n"
      "class Flaky(Exception):\n"
      "    pass\n"
      "\n"
      "def f(x):\n"
      "    mark = os.path.join(MARKS, str(x))\n"
      "    if x % 3 == 0 and not os.path.exists(mark):\n"
      "        open(mark, 'w').close()\n"
      "        raise Flaky(x)\n"
      "    if x == 4:\n"
      "        raise ValueError('four')\n"
      "    return x\n"
      "\n"
      "def shown(r):\n"
      "    return type(r).__name__ if isinstance(r, Exception) else r\n"
      "\n"
      "opts = dict(nodes=1, retries=int(sys.argv[2]), return_exceptions=True)\n"
      "if opts['retries']:\n"
      "    opts['retry_on'] = (Flaky,)\n"
      "print([shown(r) for r in ferry.map(f, range(9), **opts)])\n";
  const auto plain = run_script("flaky.py", script, script_env(), {marks.string(), "0"});
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  EXPECT_EQ(plain.out, "['Flaky', 1, 2, 'Flaky', 'ValueError', 5, 'Flaky', 7, 8]\n");
  fs::remove_all(marks);
  fs::create_directories(marks);
  const auto retried = run_script("flaky.py", script, script_env(), {marks.string(), "1"});
  ASSERT_EQ(retried.exit_code, 0) << retried.out << retried.err;
  EXPECT_EQ(retried.out, "[0, 1, 2, 3, 'ValueError', 5, 6, 7, 8]\n");  // ValueError is not retry_on's
}

TEST_F(python_api, a_large_argument_shared_by_a_thousand_tasks_is_served_once_per_node) {
  auto o = script_env();
  o.env["FERRY_NODES_MAX_NODES"] = "4";
  ASSERT_EQ(run_ferry({"nodes", "up", "4"}, o).exit_code, 0);
  const auto r = run_script("shared.py",
                            "import os, time, ferry\n"
                            "\n"
                            "big = os.urandom(100 * 2**20)\n"
                            "\n"
                            "def look(i, blob):\n"
                            "    time.sleep(0.01)\n"
                            "    return i, len(blob), blob[i], os.environ.get('SSH_CONNECTION', '').split(' ')[2]\n"
                            "\n"
                            "with ferry.Executor(nodes=4, concurrency=1) as ex:\n"
                            "    results = list(ex.map(look, range(1000), [big] * 1000))\n"
                            "print(len(results), all(r[:3] == (i, len(big), big[i]) for i, r in enumerate(results)))\n"
                            "print(' '.join(sorted(set(r[3] for r in results))))\n",
                            o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::istringstream out(r.out);
  std::string line;
  std::getline(out, line);
  EXPECT_EQ(line, "1000 True") << r.out;
  std::getline(out, line);
  std::istringstream words(line);
  std::set<std::string> nodes_used;
  for (std::string w; words >> w;) nodes_used.insert(w);
  EXPECT_GE(nodes_used.size(), 2u) << "the tasks ran on one node: " << r.out;
  // moto answers one request per connection and logs each: its GETs of the blob's key.
  std::size_t gets = 0;
  std::istringstream log(moto_->log());
  for (std::string l; std::getline(log, l);)
    if (contains(l, "\"GET /") && contains(l, "p/blobs/")) ++gets;
  EXPECT_GE(gets, 1u) << "no GET of the blob in moto's log: the count looks in the wrong place";
  EXPECT_LE(gets, nodes_used.size()) << "storage served the blob more than once to a node";
  EXPECT_LE(gets, 4u);
  RecordProperty("blob_gets", std::to_string(gets));
  RecordProperty("nodes_used", std::to_string(nodes_used.size()));
}

TEST_F(python_api, a_node_whose_python_is_another_version_is_refused_naming_both) {
  // The node's python3, first on its PATH in its own mount namespace, says it is 3.10.
  const auto fake = home_ / "py310";
  write_python_saying(fake / "python3", "3, 10, 12");
  auto o = script_env();
  o.env["FERRY_NODES_MAX_NODES"] = "1";
  ASSERT_EQ(run_ferry({"nodes", "up", "1"}, o).exit_code, 0);
  const auto in_node = node_namespace_pids();
  ASSERT_EQ(in_node.size(), 1u);
  const auto bound = run({"nsenter", "-t", in_node.front(), "-m", "mount", "--bind", fake.string(), "/usr/local/bin"});
  ASSERT_EQ(bound.exit_code, 0) << bound.err;
  const auto said = run({"nsenter", "-t", in_node.front(), "-m", "sh", "-c",
                          "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
                          "python3 -c 'import sys; print(sys.version_info[:2])'"});
  ASSERT_EQ(said.out, "(3, 10)\n") << said.err;

  const auto ran = home_ / "ran";
  const auto r = run_script("refused.py",
                            fmt::format("import sys, ferry\n"
                                        "\n"
                                        "def mark(x):\n"
                                        "    open({:?}, 'w').close()\n"
                                        "    return x\n"
                                        "\n"
                                        "try:\n"
                                        "    with ferry.Executor(nodes=1) as ex:\n"
                                        "        print(ex.submit(mark, 1).result())\n"
                                        "except ferry.FerryError as e:\n"
                                        "    print('FerryError:', e)\n"
                                        "    sys.exit(3)\n",
                                        ran.string()),
                            o);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_TRUE(r.out.starts_with("FerryError: ")) << r.out << r.err;
  // The user's terminal (the agent's stderr) says why, naming both versions and the key that chooses.
  for (const auto* part : {"3.10.12", "3.11.2", "packaging.python"})
    EXPECT_TRUE(contains(r.err, part)) << part << " in " << r.err;
  EXPECT_FALSE(fs::exists(ran)) << "a task ran on the refused node";
}

}  // namespace
}  // namespace ferry::test
