// Packaging on a real tree (the machine's own Python site-packages by default, or argv[1]) against the
// tools people use today, side by side in one run:
//   cold hash  vs  xargs -0 -P2 sha256sum over the same files
//   warm hash  vs  find -printf '%s %T@\n' over the whole tree
//   pack       vs  zip -r -q and Python's zipfile (level 6, their default) over the same files
//   pack and upload to a moto_server  vs  zip -r -q, then aws s3 cp of the zip to the same server
//   warm ship: the ferry binary's `pack` with nothing changed and everything uploaded
// The peers get exactly the files ferry packs (ferry leaves out __pycache__ and *.pyc by default).
// Each figure is the best of several runs; the page cache is warm for everyone alike.
#include "bench/bench_support.hpp"
#include "net/offload.hpp"
#include "packaging/hash_cache.hpp"
#include "packaging/layer_scan.hpp"
#include "packaging/layer_upload.hpp"
#include "packaging/pack.hpp"
#include "net/run_all.hpp"
#include "net/s3_session.hpp"
#include "net/s3_transfer.hpp"
#include "config/loader.hpp"
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
#include <fstream>
#include <sstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <signal.h>

using namespace ferry;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using bench::best_of;
using bench::quote;
using bench::shell;

namespace {

// A moto_server for the upload comparison, on a port of its own, gone with the bench.
struct moto {
  pid_t pid = -1;
  int port = 0;
  std::map<std::string, std::string, std::less<>> env;

  explicit moto(const fs::path& dir) {
    port = 20000 + ::getpid() % 20000;
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      const auto log = (dir / "moto.log").string();
      std::freopen(log.c_str(), "w", stdout);
      std::freopen(log.c_str(), "w", stderr);
      const auto p = std::to_string(port);
      ::execlp("moto_server", "moto_server", "-p", p.c_str(), nullptr);
      std::_Exit(127);
    }
    env = {{"AWS_ACCESS_KEY_ID", "bench"}, {"AWS_SECRET_ACCESS_KEY", "bench"}, {"AWS_DEFAULT_REGION", "us-east-1"},
           {"AWS_REGION", "us-east-1"}, {"AWS_ENDPOINT_URL", fmt::format("http://127.0.0.1:{}", port)}};
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    for (int i = 0; i < 100 && std::system("aws s3 mb s3://bench > /dev/null 2>&1") != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~moto() {
    if (pid > 0) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// CPU seconds (user + system) this process has used, all threads.
double own_cpu() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// CPU seconds a process has used, from /proc (moto_server is a child of a fork, not a waited-for child).
double process_cpu(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
    if (i == 15) break;
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Runs a coroutine to completion on a fresh io_context.
template <class T>
T run_on_io(boost::asio::awaitable<T> work) {
  boost::asio::io_context io;
  auto done = boost::asio::co_spawn(io, std::move(work), boost::asio::use_future);
  io.run();
  return done.get();
}

struct bench_env {
  fs::path tree;
  fs::path work = fs::temp_directory_path() / fmt::format("ferry-bench-pack-{}", ::getpid());
  std::unique_ptr<tracing::sink> out;
  std::optional<tracing::action> root;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  net::cpu_pool pool{cores};
  // ferry with one core fewer, so a storage server on this machine has a core of its own (as remote
  // storage would); 1 thread on a 1-core machine.
  unsigned fewer = std::max(1u, cores - 1);
  net::cpu_pool fewer_pool{fewer};

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

  packaging::scan_result scan(packaging::hash_cache& cache) { return scan(cache, pool, cores); }

  packaging::scan_result scan(packaging::hash_cache& cache, net::cpu_pool& on, unsigned threads) {
    boost::asio::io_context io;
    packaging::scan_options options;
    options.threads = threads;
    std::vector<packaging::root_spec> roots{{tree, packaging::root_spec::kind::site_packages, 0}};
    diagnostics diag;
    auto done = boost::asio::co_spawn(io, packaging::scan_layers(*root, on, roots, options, cache, nullptr, diag),
                                      boost::asio::use_future);
    io.run();
    auto r = done.get();
    if (!r) throw std::runtime_error(diag.message);
    return std::move(*r);
  }

  // Every shard zipped at once per pool thread, into memory (kept for the upload-alone figure).
  std::vector<std::pair<std::string, std::string>> zip_all(const packaging::scan_result& scanned) {
    return zip_all(scanned, pool, cores);
  }

  std::vector<std::pair<std::string, std::string>> zip_all(const packaging::scan_result& scanned, net::cpu_pool& on,
                                                            unsigned threads) {
    std::vector<std::pair<const packaging::layer*, const packaging::shard*>> shards;
    for (const auto& l : scanned.layers) {
      for (const auto& sh : l.shards) shards.emplace_back(&l, &sh);
    }
    std::vector<std::pair<std::string, std::string>> zips(shards.size());
    std::size_t next = 0;
    auto worker = [&]() -> boost::asio::awaitable<void> {
      while (next < shards.size()) {
        const auto i = next++;
        diagnostics diag;
        zips[i].first = packaging::shard_key("zips", *shards[i].second, packaging::zip_options{}.codec);
        std::string& bytes = zips[i].second;
        std::function<void(std::vector<char>&&)> append = [&bytes](std::vector<char>&& part) {
          bytes.append(part.data(), part.size());
        };
        auto r = co_await packaging::zip_shard(on, *shards[i].first, *shards[i].second, {}, 8 << 20, append, diag);
        if (!r) throw std::runtime_error(diag.message);
      }
    };
    run_on_io([&]() -> boost::asio::awaitable<void> {
      std::vector<boost::asio::awaitable<void>> workers;
      for (unsigned t = 0; t < threads; ++t) workers.push_back(worker());
      co_await net::run_all(std::move(workers));
    }());
    return zips;
  }
};

config::settings storage_settings(const moto& server, const fs::path& work) {
  config::load_options o;
  o.working_dir = work;
  o.env = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  diagnostics diag;
  auto loaded = config::load(o, diag);
  if (!loaded) throw std::runtime_error(diag.message);
  auto s = loaded->values;
  s.storage.endpoint = fmt::format("http://127.0.0.1:{}", server.port);
  s.storage.addressing = "path";
  return s;
}

net::s3_session open_session(boost::asio::any_io_executor io, bench_env& env, const moto& server) {
  diagnostics diag;
  auto session = net::open_s3_session(io, env.pool, storage_settings(server, env.work),
                                      net::map_environment(server.env), diag);
  if (!session) throw std::runtime_error(diag.message);
  return std::move(*session);
}

// Uploads zips already in memory, as many at once as ferry's pack does.
double upload_alone(bench_env& env, const moto& server, const std::vector<std::pair<std::string, std::string>>& zips,
                    unsigned threads, const std::string& name) {
  return best_of(1, [&] {
    run_on_io([&]() -> boost::asio::awaitable<void> {
      diagnostics diag;
      auto session = open_session(co_await boost::asio::this_coro::executor, env, server);
      std::size_t next = 0;
      auto worker = [&]() -> boost::asio::awaitable<void> {
        while (next < zips.size()) {
          const auto& [key, bytes] = zips[next++];
          std::size_t offset = 0;
          net::part_source parts = [&](diagnostics&) -> boost::asio::awaitable<result<std::optional<std::vector<char>>>> {
            if (offset >= bytes.size()) co_return std::optional<std::vector<char>>{};
            const auto n = std::min<std::size_t>(8 << 20, bytes.size() - offset);
            std::vector<char> part(bytes.data() + offset, bytes.data() + offset + n);
            offset += n;
            co_return std::optional<std::vector<char>>(std::move(part));
          };
          diagnostics d;
          if (bytes.size() <= (8u << 20)) {
            const std::span<const char> body(bytes.data(), bytes.size());
            auto r = co_await session.s3->put_object(*env.root, "bench", name + "-alone/" + key, body, d);
            if (!r) throw std::runtime_error(d.message);
          } else {
            auto r = co_await net::upload_multipart(*session.s3, *env.root, "bench", name + "-alone/" + key, parts, d);
            if (!r) throw std::runtime_error(d.message);
          }
        }
      };
      std::vector<boost::asio::awaitable<void>> workers;
      const auto uploads = packaging::upload_workers(threads, 16);
      for (unsigned t = 0; t < uploads; ++t) workers.push_back(worker());
      co_await net::run_all(std::move(workers));
    }());
  });
}

// ferry's pack() into storage from scratch (a fresh prefix each run, an empty hash cache).
double pack_and_upload(bench_env& env, const moto& server, const std::string& prefix, net::cpu_pool& pool,
                       unsigned threads) {
  return best_of(1, [&] {
    run_on_io([&]() -> boost::asio::awaitable<void> {
      diagnostics diag;
      auto session = open_session(co_await boost::asio::this_coro::executor, env, server);
      packaging::pack_settings p;
      p.scan.threads = threads;
      p.bucket = "bench";
      p.prefix = prefix;
      p.upload_concurrency = packaging::upload_workers(threads, 16);
      std::vector<packaging::root_spec> roots{{env.tree, packaging::root_spec::kind::site_packages, 0}};
      packaging::hash_cache cache;
      packaging::zip_digest_cache digests;
      const packaging::python_info python{"3", "bench", ""};  // named: GCC 12 mishandles braced temporaries here
      auto r = co_await packaging::pack(*env.root, pool, session.s3.get(), roots, python, p, cache, digests,
                                        nullptr, diag);
      if (!r) throw std::runtime_error(diag.message);
    }());
  });
}

// The three times the overlap goal compares, for ferry on `threads` threads of `pool`: its pack alone
// (cold hash and zip, nothing sent), its upload alone (those zips, already in memory), and the two
// together through pack(); with the CPU seconds ferry and moto_server spent on the last.
struct overlap_figures {
  double pack_alone = 0, upload_alone = 0, ship = 0, ship_cpu = 0, ship_moto_cpu = 0;
};

overlap_figures measure_overlap(bench_env& env, const moto& server, net::cpu_pool& pool, unsigned threads,
                                const std::string& name) {
  overlap_figures f;
  std::vector<std::pair<std::string, std::string>> zips;
  f.pack_alone = best_of(2, [&] {
    packaging::hash_cache cache;
    zips = env.zip_all(env.scan(cache, pool, threads), pool, threads);
  });
  f.upload_alone = upload_alone(env, server, zips, threads, name);
  zips.clear();
  const double cpu = own_cpu(), moto_cpu = process_cpu(server.pid);
  f.ship = pack_and_upload(env, server, name + "-ship/", pool, threads);
  f.ship_cpu = own_cpu() - cpu;
  f.ship_moto_cpu = process_cpu(server.pid) - moto_cpu;
  return f;
}

void print_overlap(const overlap_figures& f, unsigned threads, unsigned cores) {
  fmt::print("{:<12} ferry {:7.3f} s   on {} of {} cores: pack alone {:.3f} s, upload alone {:.3f} s   ratio to the "
             "longer {:5.2f}x   (goal <= 1.15x)\n", "overlap", f.ship, threads, cores, f.pack_alone, f.upload_alone,
             f.ship / std::max(f.pack_alone, f.upload_alone));
  fmt::print("{:<12} pack and upload used ferry {:.2f} + moto_server {:.2f} CPU s: on {} cores no schedule beats "
             "{:.3f} s\n", "", f.ship_cpu, f.ship_moto_cpu, cores, (f.ship_cpu + f.ship_moto_cpu) / cores);
}

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
  if (std::getenv("FERRY_BENCH_SHIP_ONLY")) {  // for tuning the pack-and-upload pipeline alone
    moto server(env.work);
    for (int i = 0; i < 4; ++i) {
      const double c = own_cpu(), m = process_cpu(server.pid);
      (void)c;
      (void)m;
      print_overlap(measure_overlap(env, server, env.pool, env.cores, fmt::format("all{}", i)), env.cores, env.cores);
      print_overlap(measure_overlap(env, server, env.fewer_pool, env.fewer, fmt::format("fewer{}", i)), env.fewer,
                    env.cores);
    }
    return 0;
  }
  if (std::getenv("FERRY_BENCH_ZIP_ONLY")) {  // for profiling compression alone
    packaging::hash_cache cache;
    last = env.scan(cache);
    for (int i = 0; i < 3; ++i) env.zip_all(last);
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

  // The same file list for every peer.
  {
    std::ofstream absolute(env.work / "files.nul"), relative(env.work / "files.txt");
    for (const auto& l : last.layers) {
      for (const auto& f : l.files) {
        absolute << (tree / f.path).string() << '\0';
        relative << f.path << '\n';
      }
    }
  }
  const double sha256sum_same =
      best_of(3, [&] { shell(fmt::format("xargs -0 -P2 sha256sum < {} > /dev/null", quote(env.work / "files.nul"))); });

  std::uint64_t ferry_zip_bytes = 0;
  std::vector<std::pair<std::string, std::string>> zips;
  const double pack_alone = best_of(2, [&] {
    zips = env.zip_all(last);
    ferry_zip_bytes = 0;
    for (const auto& z : zips) ferry_zip_bytes += z.second.size();
  });
  const auto zip_out = env.work / "peer.zip";
  const double zip_r = best_of(1, [&] {
    fs::remove(zip_out);
    shell(fmt::format("cd {} && zip -r -q {} -@ < {}", quote(tree), quote(zip_out), quote(env.work / "files.txt")));
  });
  const auto zip_r_bytes = fs::file_size(zip_out);
  const auto py_out = env.work / "python.zip";
  const double python_zip = best_of(1, [&] {
    shell(fmt::format("python3 -c \"import sys, zipfile\nwith zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_DEFLATED) as z:\n"
                      "  for n in open(sys.argv[3]).read().splitlines(): z.write(sys.argv[1] + '/' + n, n)\" {} {} {}",
                      quote(tree), quote(py_out), quote(env.work / "files.txt")));
  });

  moto server(env.work);
  zips.clear();
  const auto all_cores = measure_overlap(env, server, env.pool, env.cores, "all");
  const auto fewer_cores = measure_overlap(env, server, env.fewer_pool, env.fewer, "fewer");
  const double ferry_ship = all_cores.ship;
  const double aws_cp = best_of(1, [&] {
    shell(fmt::format("aws s3 cp --quiet {} s3://bench/peer/site-packages.zip", quote(zip_out)));
  });

  // Warm ship: the real binary, its caches warm, every layer already stored. python3 from PATH, as a user runs it.
  const auto ferry_binary = fs::absolute(fs::path(argv[0])).parent_path() / ".." / "agent" / "ferry";
  const auto project = env.work / "project";
  fs::create_directories(project);
  std::ofstream(project / "train.py") << "print('train')\n";
  fs::last_write_time(project / "train.py", fs::file_time_type::clock::now() - std::chrono::hours(1));
  const auto ship_command = fmt::format("cd {} && XDG_CACHE_HOME={} FERRY_STORAGE_URL=s3://bench/warm/ {} -q pack",
                                        quote(project), quote(env.work / "xdg"), quote(ferry_binary));
  shell(ship_command);
  const double warm_ship = best_of(5, [&] { shell(ship_command); });

  fmt::print("tree {}: {} files, {:.0f} MB, {} layers\n", tree.string(), last.files, last.bytes / 1e6,
             last.layers.size());
  line("cold hash", cold, sha256sum_same, "xargs -0 -P2 sha256sum (same files)", "<= 0.5x");
  line("", cold, sha256sum, "find | xargs -P2 sha256sum (all)", "-");
  line("warm hash", warm, find_printf, "find -printf '%s %T@'", "<= 0.6x");
  line("pack", pack_alone, zip_r, "zip -r -q (same files)", "<= 0.33x");
  line("", pack_alone, python_zip, "python zipfile", "-");
  fmt::print("{:<12} ferry {:7.1f} MB   zip -r {:7.1f} MB   ratio {:5.2f}x   (goal <= 1.15x)\n", "zip size",
             ferry_zip_bytes / 1e6, zip_r_bytes / 1e6, static_cast<double>(ferry_zip_bytes) / zip_r_bytes);
  line("ship", ferry_ship, zip_r + aws_cp, "zip -r -q, then aws s3 cp", "<= 0.33x");
  print_overlap(all_cores, env.cores, env.cores);
  print_overlap(fewer_cores, env.fewer, env.cores);
  fmt::print("{:<12} ferry {:7.3f} s   (`ferry -q pack`, nothing changed, python3 = the pyenv shim; goal <= 0.150 s)\n",
             "warm ship", warm_ship);
  return 0;
}
