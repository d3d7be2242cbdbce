#pragma once
// A private world for a bench that drives the ferry binary on local nodes against a moto_server on the
// bridge address, where the nodes reach it: its own XDG dirs (key, registry, caches), AWS settings that
// reach nothing else, and, when it goes, the nodes ended, moto_server killed and the dir removed.
//
// With `fresh_filesystem`, the dir is a new ext4 of its own (a sparse image beside it, mounted there), as a
// new node's disk is. A long-used filesystem can make creating files slow: ext4 without a journal (this
// machine's root) skips inodes freed in the last minutes, one inode table lookup each, so a bench that makes
// and removes tens of thousands of files measures the churn of its earlier runs, not the work.
#include "bench/bench_support.hpp"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace ferry::bench {

class node_world {
 public:
  node_world(const std::string& name, std::string binary, bool fresh_filesystem = false)
      : dir(std::filesystem::temp_directory_path() / fmt::format("ferry-bench-{}-{}", name, ::getpid())),
        ferry(std::move(binary)) {
    namespace fs = std::filesystem;
    fs::create_directories(dir);
    if (fresh_filesystem) mount_fresh_filesystem();
    // Local nodes read the project's files as other users would.
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
    for (const char* v : {"XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"}) ::setenv(v, (dir / v).c_str(), 1);
    ::setenv("FERRY_PROVIDER", "local", 1);
    for (const char* v : {"AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"}) ::unsetenv(v);
    ::setenv("AWS_ACCESS_KEY_ID", "bench", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "bench", 1);
    ::setenv("AWS_DEFAULT_REGION", "us-east-1", 1);
    ::setenv("AWS_CONFIG_FILE", "/dev/null", 1);
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null", 1);
  }
  node_world(const node_world&) = delete;
  node_world& operator=(const node_world&) = delete;
  ~node_world() {
    std::system(fmt::format("{} -q nodes down --all > /dev/null 2>&1", quote(ferry)).c_str());
    if (moto_ > 0) {
      ::kill(-moto_, SIGKILL);
      ::waitpid(moto_, nullptr, 0);
    }
    if (image_.empty()) {
      std::filesystem::remove_all(dir);
      return;
    }
    // A mount point cannot go while mounted: its image goes whole once unmounted.
    std::system(fmt::format("umount {0} && rmdir {0} && rm -f {1}", quote(dir), quote(image_)).c_str());
  }

  // moto_server on 10.200.0.1 (the ferry0 bridge must exist: bring nodes up first), with a bucket `bench`;
  // AWS_ENDPOINT_URL points ferry at it.
  void start_moto() {
    const auto port = first_line(output_of(
        "python3 -c 'import socket; s = socket.socket(); s.bind((\"10.200.0.1\", 0)); print(s.getsockname()[1])'"));
    endpoint = fmt::format("http://10.200.0.1:{}", port);
    std::fflush(nullptr);  // else the child's freopen writes what the parent had buffered a second time
    moto_ = ::fork();
    if (moto_ == 0) {
      ::setpgid(0, 0);
      const auto log = (dir / "moto.log").string();
      std::freopen(log.c_str(), "w", stdout);
      std::freopen(log.c_str(), "w", stderr);
      ::execlp("moto_server", "moto_server", "-H", "10.200.0.1", "-p", port.c_str(), nullptr);
      ::_exit(127);
    }
    ::setenv("AWS_ENDPOINT_URL", endpoint.c_str(), 1);
    for (int i = 0; i < 100; ++i) {
      if (std::system(fmt::format("curl -s -o /dev/null {}", endpoint).c_str()) == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    shell("aws s3 mb s3://bench > /dev/null");
  }

  std::filesystem::path dir;
  std::string ferry;
  std::string endpoint;  // moto_server's, once started

 private:
  // A journal, so that freed inodes are reused at once; the inode tables written now, not by the kernel
  // in the background during the bench; discard, so that what the bench removes leaves the image.
  void mount_fresh_filesystem() {
    image_ = dir.string() + ".img";
    shell(fmt::format("truncate -s 40G {0} && mkfs.ext4 -q -F -i 32768 -E lazy_itable_init=0,lazy_journal_init=0 {0} "
                      "&& mount -o loop,discard {0} {1}",
                      quote(image_), quote(dir)));
  }

  std::string image_;  // the fresh filesystem's image, when there is one
  pid_t moto_ = -1;
};

}  // namespace ferry::bench
