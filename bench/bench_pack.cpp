// Packaging on a real tree (the machine's own Python site-packages by default, or argv[1]) against the
// tools people use today, side by side in one run:
//   cold hash  vs  find -type f -print0 | xargs -0 -P2 sha256sum
//   warm hash  vs  find -printf '%s %T@\n'
// Each figure is the best of several runs; the page cache is warm for everyone alike.
#include "net/offload.hpp"
#include "packaging/hash_cache.hpp"
#include "packaging/layer_scan.hpp"
#include "tracing/action.hpp"
#include "tracing/sink.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

using namespace ferry;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

double best_of(int runs, const std::function<void()>& f) {
  double best = 1e9;
  for (int i = 0; i < runs; ++i) {
    const auto start = clock_type::now();
    f();
    best = std::min(best, std::chrono::duration<double>(clock_type::now() - start).count());
  }
  return best;
}

void shell(const std::string& command) {
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
}

struct bench_env {
  fs::path tree;
  fs::path work = fs::temp_directory_path() / fmt::format("ferry-bench-pack-{}", ::getpid());
  std::unique_ptr<tracing::sink> out;
  std::optional<tracing::action> root;
  net::cpu_pool pool{std::max(1u, std::thread::hardware_concurrency())};

  explicit bench_env(fs::path t) : tree(std::move(t)) {
    fs::create_directories(work);
    diagnostics diag;
    auto s = tracing::sink::open(std::getenv("FERRY_BENCH_TRACE") ? fs::path(std::getenv("FERRY_BENCH_TRACE")) : work / "trace.jsonl", diag);
    if (!s) throw std::runtime_error(diag.message);
    out = std::move(*s);
    root.emplace(tracing::action::start_task(*out, "bench:pack"));
  }
  ~bench_env() {
    root->succeed();
    out->flush();
    fs::remove_all(work);
  }

  packaging::scan_result scan(packaging::hash_cache& cache) {
    boost::asio::io_context io;
    packaging::scan_options options;
    options.threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<packaging::root_spec> roots{{tree, packaging::root_spec::kind::site_packages, 0}};
    diagnostics diag;
    auto done = boost::asio::co_spawn(io, packaging::scan_layers(*root, pool, roots, options, cache, nullptr, diag),
                                      boost::asio::use_future);
    io.run();
    auto r = done.get();
    if (!r) throw std::runtime_error(diag.message);
    return std::move(*r);
  }
};

void line(const char* what, double ferry, double peer, const char* peer_name, const char* goal) {
  fmt::print("{:<12} ferry {:7.3f} s   {:<34} {:7.3f} s   ratio {:5.2f}x   (goal {})\n", what, ferry, peer_name, peer,
             ferry / peer, goal);
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path tree = argc > 1 ? argv[1] : "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages";
  bench_env env(tree);
  const auto cache_file = env.work / "hash-cache";
  packaging::scan_result last;

  if (std::getenv("FERRY_BENCH_WARM_ONLY")) {  // for profiling the warm path alone
    auto cache = packaging::hash_cache::load(cache_file);
    env.scan(cache);
    diagnostics diag;
    (void)cache.save(diag);
    for (int i = 0; i < 20; ++i) {
      auto warm_cache = packaging::hash_cache::load(cache_file);
      env.scan(warm_cache);
    }
    return 0;
  }
  // Warm the page cache for everyone, then measure.
  shell(fmt::format("find '{}' -type f -print0 | xargs -0 cat > /dev/null", tree.string()));
  const double cold = best_of(3, [&] {
    packaging::hash_cache cache;
    last = env.scan(cache);
  });
  const double sha256sum =
      best_of(3, [&] { shell(fmt::format("find '{}' -type f -print0 | xargs -0 -P2 sha256sum > /dev/null", tree.string())); });
  {
    auto cache = packaging::hash_cache::load(cache_file);
    env.scan(cache);
    diagnostics diag;
    if (!cache.save(diag)) throw std::runtime_error(diag.message);
  }
  const double warm = best_of(5, [&] {
    auto cache = packaging::hash_cache::load(cache_file);
    last = env.scan(cache);
    if (last.hashed_files != 0) throw std::runtime_error("warm scan read files");
  });
  const double find_printf =
      best_of(5, [&] { shell(fmt::format("find '{}' -printf '%s %T@\\n' > /dev/null", tree.string())); });

  fmt::print("tree {}: {} files, {:.0f} MB, {} layers\n", tree.string(), last.files, last.bytes / 1e6,
             last.layers.size());
  line("cold hash", cold, sha256sum, "find | xargs -P2 sha256sum", "<= 0.5x");
  line("warm hash", warm, find_printf, "find -printf '%s %T@'", "<= 0.6x");
  return 0;
}
