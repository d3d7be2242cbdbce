// The fault matrix: ferry against storage that breaks, counted rather than timed.
//
//   cut:    uploads (`ferry storage cp`) through the test proxy, each connection cut at a random byte
//           offset; half the time only the first connection (a retry can finish), half the time every
//           one (the upload must fail). Every object that exists afterwards is read back with the aws CLI
//           and compared with its source; no multipart upload may be left in the bucket.
//   freeze: a pack of one layer in 2 shards, each a multipart upload, with moto_server stopped (SIGSTOP)
//           once both uploads exist. ferry must exit non-zero on its own; the time from the freeze to
//           the exit is compared with the configured deadlines.
//   ctrl-c: the same pack (a fresh prefix each time) interrupted with SIGINT at a random moment in its
//           first 2.5 s: the time to exit, the multipart uploads left in the bucket, the trace complete.
//
// FERRY_BENCH_CUTS (100), FERRY_BENCH_FREEZES (20) and FERRY_BENCH_INTERRUPTS (50) set the rounds.
#include "bench_support.hpp"
#include "support/eliot.hpp"
#include "support/fault_proxy.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <fmt/format.h>

#include <csignal>
#include <fstream>
#include <random>
#include <thread>

namespace {

namespace fs = std::filesystem;
using ferry::test::fault_proxy;
using ferry::test::moto_server;
using ferry::test::temp_dir;

int rounds(const char* variable, int fallback) {
  const char* v = std::getenv(variable);
  return v ? std::max(1, std::atoi(v)) : fallback;
}

void write_random(const fs::path& file, std::size_t size, std::mt19937_64& rng) {
  std::string bytes(size, '\0');
  for (auto& b : bytes) b = static_cast<char>(rng());
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool same_file(const fs::path& a, const fs::path& b) {
  return fs::file_size(a) == fs::file_size(b) && ferry::test::read_file(a) == ferry::test::read_file(b);
}

std::size_t multipart_uploads_left(const moto_server& moto, const std::string& bucket) {
  const auto r = moto.aws({"s3api", "list-multipart-uploads", "--bucket", bucket, "--query", "length(Uploads || `[]`)",
                           "--output", "text"});
  if (r.exit_code != 0) throw std::runtime_error("list-multipart-uploads failed: " + r.err);
  return static_cast<std::size_t>(std::stoul(r.out));
}

void cut_uploads(int count) {
  moto_server moto;
  moto.make_bucket("cuts");
  fault_proxy proxy("127.0.0.1", moto.port());
  temp_dir dir;
  std::mt19937_64 rng(20261124);
  auto options = moto.process_env();
  options.env["AWS_ENDPOINT_URL"] = proxy.endpoint();
  options.env["XDG_STATE_HOME"] = (dir / "state").string();
  options.env["XDG_CACHE_HOME"] = (dir / "cache").string();
  options.env["FERRY_S3_MULTIPART_THRESHOLD"] = "8MiB";
  options.env["FERRY_S3_PART_SIZE"] = "5MiB";
  options.env["FERRY_NET_RETRY_MAX_ATTEMPTS"] = "3";
  int succeeded = 0, failed = 0, corrupt = 0, absent_after_failure = 0;
  for (int i = 0; i < count; ++i) {
    const auto size = std::uniform_int_distribution<std::size_t>(64 << 10, 24 << 20)(rng);
    const auto source = dir / fmt::format("source-{}.bin", i);
    write_random(source, size, rng);
    const bool every = i % 2 == 1;
    proxy.clear_faults();
    proxy.set_faulty_connections(every ? fault_proxy::unlimited : 1);
    // The request's headers come first: a cut anywhere from the first byte to the body's last.
    proxy.cut_upload_after(std::uniform_int_distribution<std::uint64_t>(1, size)(rng));
    const auto key = fmt::format("object-{}.bin", i);
    const auto r = ferry::test::run_ferry({"storage", "cp", source.string(), "s3://cuts/" + key}, options);
    proxy.clear_faults();
    const auto back = dir / "back.bin";
    fs::remove(back);
    const auto got = moto.aws({"s3", "cp", "s3://cuts/" + key, back.string()});
    const bool stored = got.exit_code == 0;
    if (r.exit_code == 0) {
      ++succeeded;
      if (!stored || !same_file(source, back)) ++corrupt;
    } else {
      ++failed;
      if (!stored) ++absent_after_failure;
      else if (!same_file(source, back)) ++corrupt;
    }
    fs::remove(source);
  }
  const auto left = multipart_uploads_left(moto, "cuts");
  fmt::print("cut uploads: {} rounds, {} succeeded, {} failed ({} of them left no object), {} corrupt objects, "
             "{} multipart uploads left, {} connections cut\n",
             count, succeeded, failed, absent_after_failure, corrupt, left, proxy.connections_cut());
}

// `ferry pack` of the workspace `ws` (one layer of 2 shards) into `url`, with its state under `state`.
ferry::test::process_options pack_options(const moto_server& moto, const temp_dir& ws, const temp_dir& state,
                                          const std::string& url) {
  auto options = moto.process_env();
  options.cwd = ws.path();
  options.env["XDG_STATE_HOME"] = (state / "state").string();
  options.env["XDG_CACHE_HOME"] = (state / "cache").string();
  options.env["FERRY_STORAGE_URL"] = url;
  options.env["FERRY_PACKAGING_SHIP_SITE_PACKAGES"] = "false";
  options.env["FERRY_PACKAGING_SHARD_SIZE"] = "20MiB";
  return options;
}

void freeze_packs(int count) {
  temp_dir ws, state;
  std::mt19937_64 rng(7);
  write_random(ws / "a.bin", 24 << 20, rng);
  write_random(ws / "b.bin", 24 << 20, rng);
  constexpr double read_timeout = 3.0;
  double worst = 0;
  int hangs = 0, nonzero = 0;
  for (int i = 0; i < count; ++i) {
    moto_server moto;
    moto.make_bucket("frozen");
    auto options = pack_options(moto, ws, state, fmt::format("s3://frozen/round-{}/", i));
    options.env["FERRY_NET_READ_TIMEOUT"] = "3s";
    options.env["FERRY_NET_WRITE_TIMEOUT"] = "3s";
    options.env["FERRY_NET_RETRY_MAX_ATTEMPTS"] = "1";
    auto child = ferry::test::spawn_ferry({"pack"}, options);
    auto uploads = [&] {
      const auto log = moto.log();
      std::size_t n = 0;
      for (auto at = log.find("?uploads="); at != std::string::npos; at = log.find("?uploads=", at + 1)) ++n;
      return n;
    };
    for (int t = 0; t < 1500 && uploads() < 2 && !ferry::test::dead_or_zombie(child->pid()); ++t)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    moto.freeze();
    const auto frozen_at = std::chrono::steady_clock::now();
    bool ended = false;
    while (!ended && std::chrono::steady_clock::now() - frozen_at < std::chrono::seconds(120)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ended = ferry::test::dead_or_zombie(child->pid());
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen_at).count();
    moto.thaw();
    if (!ended) {
      ++hangs;
      child->signal(SIGKILL);
    }
    const auto r = child->wait();
    if (r.exit_code != 0) ++nonzero;
    worst = std::max(worst, took);
    fmt::print("  freeze round {}: exit {} {:.2f} s after the freeze\n", i + 1, r.exit_code, took);
  }
  fmt::print("frozen storage: {} rounds, {} hangs (no exit within 120 s), {} exited non-zero, slowest exit {:.2f} s "
             "after the freeze (net.read_timeout {:.0f} s, 1 attempt; then the abort's own deadline)\n",
             count, hangs, nonzero, worst, read_timeout);
}

void interrupt_packs(int count) {
  temp_dir ws, state;
  std::mt19937_64 rng(11);
  write_random(ws / "a.bin", 24 << 20, rng);
  write_random(ws / "b.bin", 24 << 20, rng);
  moto_server moto;
  moto.make_bucket("interrupted");
  double worst = 0;
  int completed = 0, interrupted = 0, incomplete_traces = 0;
  for (int i = 0; i < count; ++i) {
    auto options = pack_options(moto, ws, state, fmt::format("s3://interrupted/round-{}/", i));
    const auto trace = state / fmt::format("round-{}.jsonl", i);
    auto child = ferry::test::spawn_ferry({"pack", "--trace", trace.string()}, options);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 2500)(rng)));
    const auto sent = std::chrono::steady_clock::now();
    child->signal(SIGINT);
    const auto r = child->wait();
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    worst = std::max(worst, took);
    (r.exit_code == 130 ? interrupted : completed) += 1;
    const auto tasks = ferry::test::eliot_parse({trace});
    if (tasks.size() != 1 || !tasks[0].at("complete").as_bool()) ++incomplete_traces;
  }
  const auto left = multipart_uploads_left(moto, "interrupted");
  fmt::print("ctrl-c: {} rounds, {} interrupted (exit 130), {} finished first, slowest exit {:.2f} s after SIGINT, "
             "{} multipart uploads left, {} traces that python3-eliot could not rebuild whole\n",
             count, interrupted, completed, worst, left, incomplete_traces);
}

}  // namespace

int main() {
  try {
    cut_uploads(rounds("FERRY_BENCH_CUTS", 100));
    freeze_packs(rounds("FERRY_BENCH_FREEZES", 20));
    interrupt_packs(rounds("FERRY_BENCH_INTERRUPTS", 50));
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_faults: {}\n", e.what());
    return 1;
  }
  return 0;
}
