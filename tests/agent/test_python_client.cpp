// The ferry package against a real `ferry api` that cannot start its job: no nodes are needed to see that the
// agent's own reason reaches the Python caller as a FerryError, and that `ferry api` refuses a frame it cannot
// read. The tests with nodes are in test_python_api.cpp.
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include "local_run.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;

process_options client_env(const temp_dir& home) {
  process_options o;
  use_home(o, home.path());
  o.env["PYTHONPATH"] = (fs::path(FERRY_SOURCE_DIR) / "python").string();
  o.env["FERRY_BIN"] = FERRY_BINARY;
  o.unset_env.push_back("FERRY_STORAGE_URL");
  o.cwd = home.path();
  return o;
}

TEST(python_client, the_agents_reason_reaches_the_caller_as_a_ferry_error) {
  temp_dir home;
  const auto r = run({"/usr/bin/python3", "-c",
                      "import ferry\n"
                      "try:\n"
                      "    ferry.Executor(nodes=1).submit(abs, -1).result()\n"
                      "except ferry.FerryError as e:\n"
                      "    print('FerryError:', e)\n"},
                     client_env(home));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "FerryError: ")) << r.out;
  EXPECT_TRUE(contains(r.out, "storage.url is not set")) << r.out;
}

TEST(python_client, ferry_api_refuses_a_frame_it_cannot_read) {
  temp_dir home;
  auto o = client_env(home);
  o.env["FERRY_STORAGE_URL"] = "s3://bucket/p";
  o.env["AWS_ACCESS_KEY_ID"] = "x";
  o.env["AWS_SECRET_ACCESS_KEY"] = "x";
  o.env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9";  // nothing listens: the job fails later, the frame first
  // A task that names a function no `F` frame brought.
  const auto r = run({"/usr/bin/python3", "-c",
                      "import subprocess, struct, sys, os\n"
                      "p = subprocess.Popen([os.environ['FERRY_BIN'], 'api', '--nodes', '1'], stdin=subprocess.PIPE,"
                      " stdout=subprocess.PIPE)\n"
                      "task = struct.pack('<QBH', 7, 0, 0) + b'args'\n"
                      "p.stdin.write(struct.pack('<IBQ', len(task), ord('T'), 1) + task)\n"
                      "p.stdin.flush()\n"
                      "out = p.stdout.read()\n"
                      "p.stdin.close()\n"
                      "print(p.wait(), out[13:].decode() if out[4:5] == b'X' else repr(out))\n"},
                     o);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("1 ")) << r.out;
  EXPECT_TRUE(contains(r.out, "cannot be read")) << r.out;
}

}  // namespace
}  // namespace ferry::test
