// Fan-out (agent/materialise/fanout_plan.hpp) where it is meant to pay: the env step of a cold start of a 40 MB
// environment on 32 warm local nodes, with storage whose egress is limited (an on-premises store, a
// workstation's uplink, S3's per-prefix limits).
//   storage     moto_server on 10.200.0.1 behind the test proxy (tests/support/fault_proxy.hpp) in its rate
//               mode: one link of R bytes/s out of storage, shared by every connection. AWS_ENDPOINT_URL is
//               the proxy's, so the presigned URLs the nodes get go through it; node-to-node fetches do not.
//   project     a venv whose site-packages holds copies of packages of this machine, chosen by the bytes
//               ferry ships of each (without __pycache__ and *.pyc): from /usr/lib/python3/dist-packages,
//               largest under 30 MB first, awscli skipped, until at least 40 MB (the last one the smallest
//               that reaches it); when that directory holds less, as it does without __pycache__, the same
//               rule goes on in python3's own site-packages.
//   a case      a fresh `_salt.py` in every package and in the workspace (every layer new), `ferry -q pack`
//               (uploads, not timed, the link unthrottled), then `ferry --trace T run -- sh -c 'echo ok'` on
//               the 32 nodes with the link at R: the pack is all cached, so the start-up line's env is the
//               whole of the nodes' work. From the node programs' traces: per (layer, shard) how many
//               `ferry:materialise:shard` fetches had source "storage", their bytes, and the peer fetches.
// Each storage rate (FERRY_BENCH_STORE_MBPS, MB/s, a comma list, default 10,25,100; an unthrottled link, 0,
// is always run too) runs fan-out off and on, best of FERRY_BENCH_ROUNDS (default 2) rounds, off and on
// alternating within a round. Goals (issue): with fan-out storage serves each layer at most 4 times
// (nodes.fanout_seeds), and the env step is at least 3x faster than without.
#include "bench/bench_support.hpp"
#include "bench/bench_world.hpp"
#include "support/fault_proxy.hpp"
#include "tracing/action_types.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace json = boost::json;
using ferry::bench::field;
using ferry::bench::first_line;
using ferry::bench::output_of;
using ferry::bench::quote;
using ferry::bench::shell;

namespace {

constexpr std::uint64_t env_target = 40'000'000;   // bytes ferry ships of the chosen packages, at least
constexpr std::uint64_t package_limit = 30'000'000;  // no single package of this size or more

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// ---- The environment ----

struct package {
  std::string name;
  fs::path source;
  std::uint64_t bytes = 0;  // as ferry ships it: no __pycache__, no *.pyc
};

std::uint64_t shipped_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const auto& p = it->path();
    if (it->is_directory() && p.filename() == "__pycache__") {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink() || !it->is_regular_file() || p.extension() == ".pyc") continue;
    total += it->file_size();
  }
  return total;
}

std::string site_packages_of(const std::string& python) {
  return first_line(output_of(fmt::format("{} -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'", python)));
}

// Package directories under 30 MB, source by source, the largest first until 40 MB; the last one taken is the
// smallest that reaches 40 MB, when one does, so that the environment ends near 40 MB.
std::vector<package> choose_packages() {
  std::vector<fs::path> sources{"/usr/lib/python3/dist-packages"};
  const fs::path own = site_packages_of("python3");
  if (fs::exists(own) && !fs::equivalent(own, sources[0])) sources.push_back(own);
  std::vector<package> chosen;
  std::set<std::string> names;
  std::uint64_t total = 0;
  for (const auto& source : sources) {
    if (!fs::is_directory(source)) continue;
    std::vector<package> candidates;
    for (const auto& e : fs::directory_iterator(source)) {
      const auto name = e.path().filename().string();
      if (!e.is_directory() || e.is_symlink() || name == "__pycache__" || name == "awscli" ||
          name.find('.') != std::string::npos || names.count(name))
        continue;  // dist-info, egg-info and the like hold dots
      candidates.push_back({name, e.path(), shipped_bytes(e.path())});
    }
    std::erase_if(candidates, [](const package& c) { return c.bytes >= package_limit || c.bytes == 0; });
    // Largest first (the first candidate), unless one alone reaches 40 MB: then the smallest that does.
    std::sort(candidates.begin(), candidates.end(), [](const package& a, const package& b) { return a.bytes > b.bytes; });
    while (total < env_target && !candidates.empty()) {
      auto take = candidates.begin();
      for (auto it = candidates.begin(); it != candidates.end(); ++it)
        if (total + it->bytes >= env_target) take = it;
      total += take->bytes;
      names.insert(take->name);
      chosen.push_back(std::move(*take));
      candidates.erase(take);
    }
    if (total >= env_target) break;
  }
  if (total < env_target) throw std::runtime_error(fmt::format("only {} bytes of packages found", total));
  return chosen;
}

// ---- The world ----

struct world : ferry::bench::node_world {
  fs::path project = dir / "project";
  fs::path site;  // the venv's site-packages
  std::vector<package> packages;
  std::unique_ptr<ferry::test::fault_proxy> proxy;  // storage's link
  int nodes = 32;
  int cases = 0;

  explicit world(std::string binary) : node_world("fanout", std::move(binary)) { fs::create_directories(project); }
  std::string in_project(const std::string& command) const { return fmt::format("cd {} && {}", quote(project), command); }

  void make_project() {
    packages = choose_packages();
    std::ofstream(project / "ferry.toml") << "[packaging]\npython = \".venv/bin/python\"\n";
    std::ofstream(project / ".gitignore") << ".venv/\n";
    std::ofstream(project / "main.py") << "print('ok')\n";
    shell(fmt::format("/usr/bin/python3 -m venv --without-pip {}", quote(project / ".venv")));
    site = site_packages_of(quote(project / ".venv" / "bin" / "python"));
    for (const auto& p : packages)
      shell(fmt::format("rsync -a --exclude __pycache__ --exclude '*.pyc' {}/ {}/", quote(p.source),
                        quote(site / p.name)));
  }

  // Every layer new: a fresh value in each package and in the workspace.
  void salt() {
    static std::mt19937_64 random{std::random_device{}()};
    const auto value = fmt::format("SALT = '{:016x}'\n", random());
    std::ofstream(project / "_salt.py") << value;
    for (const auto& p : packages) std::ofstream(site / p.name / "_salt.py") << value;
    // Local nodes read the project as other users.
    shell(fmt::format("chmod -R a+rX {}", quote(project)));
  }

  // Untimed, after each case: the layers (salted, never used again) and fan-out copies off the nodes, so that
  // the disk holds one case's and ending the nodes stays quick (32 x 7,700 files a case otherwise pile up).
  void empty_node_caches() const {
    const auto start = std::chrono::steady_clock::now();
    shell(fmt::format("{} -q exec -- sh -c 'rm -rf \"${{XDG_CACHE_HOME:-$HOME/.cache}}/ferry/layers\" "
                      "\"${{XDG_CACHE_HOME:-$HOME/.cache}}/ferry/serve\"' > /dev/null",
                      quote(ferry)));
    fmt::print(stderr, "bench_fanout: node caches emptied in {:.1f} s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

  // Storage behind the proxy, for ferry and (through presigned URLs) the nodes.
  void storage_behind_proxy() {
    const auto port = static_cast<std::uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
    proxy = std::make_unique<ferry::test::fault_proxy>("10.200.0.1", port, "10.200.0.1");
    ::setenv("AWS_ENDPOINT_URL", proxy->endpoint().c_str(), 1);
    ::unsetenv("FERRY_STORAGE_NODE_ENDPOINT");
    ::setenv("FERRY_STORAGE_URL", "s3://bench/fanout", 1);
  }
};

// ---- The traces ----

struct fetches {
  std::map<std::pair<std::string, int>, int> storage_per_shard;  // every shard seen, 0 when only peers served it
  std::map<std::pair<std::string, int>, std::uint64_t> shard_bytes;
  std::uint64_t storage_bytes = 0;
  int storage = 0, peer = 0, failed_storage = 0, failed_peer = 0;
  std::set<std::string> node_files;  // node trace files with a shard fetch

  int max_storage() const {
    int m = 0;
    for (const auto& [k, n] : storage_per_shard) m = std::max(m, n);
    return m;
  }
  double mean_storage() const {
    return storage_per_shard.empty() ? 0 : double(storage) / double(storage_per_shard.size());
  }
  std::size_t layers() const {
    std::set<std::string> ids;
    for (const auto& [k, n] : shard_bytes) ids.insert(k.first);
    return ids.size();
  }
  std::uint64_t unique_bytes() const {
    std::uint64_t b = 0;
    for (const auto& [k, n] : shard_bytes) b += n;
    return b;
  }
};

std::string string_field(const json::object& o, const char* name) {
  auto* v = o.if_contains(name);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

std::uint64_t number_field(const json::object& o, const char* name) {
  auto* v = o.if_contains(name);
  return v && v->is_number() ? v->to_number<std::uint64_t>() : 0;
}

// The shard fetches of one trace file: a start names layer, shard, bytes and source; a failed end is matched to
// its start by task_uuid and task_level without its last step.
void read_fetches(const fs::path& file, fetches& out) {
  std::ifstream in(file);
  std::string line;
  std::map<std::string, bool> from_storage;  // by action
  while (std::getline(in, line)) {
    json::error_code ec;
    auto v = json::parse(line, ec);
    if (ec || !v.is_object()) continue;
    const auto& o = v.as_object();
    if (string_field(o, "action_type") != ferry::action_types::node::shard) continue;
    std::string key = string_field(o, "task_uuid");
    if (auto* l = o.if_contains("task_level"); l && l->is_array()) {
      const auto& a = l->as_array();
      for (std::size_t i = 0; i + 1 < a.size(); ++i) key += "/" + json::serialize(a[i]);
    }
    const auto status = string_field(o, "action_status");
    if (status == "started") {
      const std::pair<std::string, int> shard{string_field(o, "layer"), static_cast<int>(number_field(o, "shard"))};
      const auto bytes = number_field(o, "bytes");
      const bool storage = string_field(o, "source") == "storage";
      from_storage[key] = storage;
      out.shard_bytes[shard] = bytes;
      auto& count = out.storage_per_shard[shard];
      if (storage) {
        ++count;
        ++out.storage;
        out.storage_bytes += bytes;
      } else {
        ++out.peer;
      }
      out.node_files.insert(file.filename().string());
    } else if (status == "failed") {
      if (auto it = from_storage.find(key); it != from_storage.end()) ++(it->second ? out.failed_storage : out.failed_peer);
    }
  }
}

// ---- A case ----

struct case_result {
  double env = 1e9;
  std::string line;
  fetches f;
  std::uint64_t link_bytes = 0;  // out of storage through the proxy during the run
};

case_result run_case(world& w, std::uint64_t rate, bool fanout) {
  w.salt();
  w.proxy->set_rate(0);
  shell(w.in_project(fmt::format("{} -q pack", quote(w.ferry))));
  const auto dir = w.dir / "traces" / fmt::format("case-{}", ++w.cases);
  fs::create_directories(dir);
  const auto trace = dir / "run.jsonl";
  const auto out = dir / "stdout";
  ::setenv("FERRY_NODES_FANOUT", fanout ? "true" : "false", 1);
  case_result c;
  const auto before = w.proxy->bytes_downloaded();
  w.proxy->set_rate(rate);
  const auto err = output_of(w.in_project(fmt::format("{} --trace {} run -- sh -c 'echo ok' 2>&1 > {}", quote(w.ferry),
                                                      quote(trace), quote(out))));
  w.proxy->set_rate(0);
  c.link_bytes = w.proxy->bytes_downloaded() - before;
  const auto at = err.rfind("ready in");
  if (at == std::string::npos) throw std::runtime_error("no start-up line in:\n" + err);
  c.line = first_line(err.substr(at));
  c.env = field(c.line, "env");
  std::ifstream in(out);
  int oks = 0;
  // Each line carries its node's name in front.
  for (std::string l; std::getline(in, l);) oks += l.size() >= 2 && l.compare(l.size() - 2, 2, "ok") == 0;
  if (oks != w.nodes) throw std::runtime_error(fmt::format("{} lines of ok from {} nodes; stderr:\n{}", oks, w.nodes, err));
  const auto prefix = trace.stem().string() + ".node-";
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) read_fetches(e.path(), c.f);
  if (static_cast<int>(c.f.node_files.size()) < w.nodes)
    throw std::runtime_error(fmt::format("shard fetches in {} node traces, not {}", c.f.node_files.size(), w.nodes));
  fs::remove_all(dir);  // 32 node traces a case
  w.empty_node_caches();
  return c;
}

std::string rate_name(std::uint64_t rate) { return rate ? fmt::format("{} MB/s", rate / 1'000'000) : "unthrottled"; }

struct sitting {
  std::uint64_t rate = 0;
  case_result best[2];            // [fanout]
  std::vector<double> envs[2];    // every round's
};

void print_case(const sitting& s, bool fanout) {
  const auto& c = s.best[fanout];
  std::string rounds;
  for (const auto e : s.envs[fanout]) rounds += fmt::format("{}{:.2f}", rounds.empty() ? "" : " ", e);
  fmt::print("  {:<12} {:<4} {:7.2f} s  ({:<17}) {:3d} / {:5.2f} {:9.1f} MB {:5d} {:5d} {:4d}/{:<4d} {:8.1f} MB\n",
             rate_name(s.rate), fanout ? "on" : "off", c.env, rounds, c.f.max_storage(), c.f.mean_storage(),
             c.f.storage_bytes / 1e6, c.f.storage, c.f.peer, c.f.failed_storage, c.f.failed_peer, c.link_bytes / 1e6);
}

int run(world& w) {
  const int rounds = env_int("FERRY_BENCH_ROUNDS", 2);
  w.nodes = env_int("FERRY_BENCH_NODES", 32);
  std::vector<std::uint64_t> rates;
  {
    std::stringstream list(std::getenv("FERRY_BENCH_STORE_MBPS") ? std::getenv("FERRY_BENCH_STORE_MBPS") : "10,25,100");
    for (std::string item; std::getline(list, item, ',');)
      if (!item.empty()) rates.push_back(static_cast<std::uint64_t>(std::atof(item.c_str()) * 1e6));
    if (std::find(rates.begin(), rates.end(), 0) == rates.end()) rates.push_back(0);
  }
  ::setenv("FERRY_NODES_MAX_NODES", std::to_string(std::max(64, w.nodes)).c_str(), 1);
  ::setenv("FERRY_NODES_COUNT", std::to_string(w.nodes).c_str(), 1);

  w.make_project();
  shell(fmt::format("{} -q nodes up {} > /dev/null", quote(w.ferry), w.nodes));  // makes the bridge moto listens on
  w.start_moto();
  w.storage_behind_proxy();
  // Warm: the node program installed on every node.
  w.salt();
  shell(w.in_project(fmt::format("{} -q run -- true > /dev/null", quote(w.ferry))));
  w.empty_node_caches();

  std::vector<sitting> sittings;
  for (const auto rate : rates) {
    sitting s;
    s.rate = rate;
    for (int r = 0; r < rounds; ++r)
      for (const bool fanout : {false, true}) {
        auto c = run_case(w, rate, fanout);
        fmt::print(stderr, "bench_fanout: {} fan-out {} round {}: env {:.2f} s, {} storage / {} peer fetches\n",
                   rate_name(rate), fanout ? "on" : "off", r + 1, c.env, c.f.storage, c.f.peer);
        s.envs[fanout].push_back(c.env);
        if (c.env < s.best[fanout].env) s.best[fanout] = std::move(c);
      }
    sittings.push_back(std::move(s));
  }

  std::uint64_t shipped = 0;
  std::string names;
  std::uint64_t small = 0;
  int smalls = 0;
  for (const auto& p : w.packages) {
    shipped += p.bytes;
    if (p.bytes >= 1'000'000) {
      names += fmt::format("{} {:.1f}, ", p.name, p.bytes / 1e6);
    } else {
      small += p.bytes;
      ++smalls;
    }
  }
  names += fmt::format("{} under 1 MB: {:.1f}", smalls, small / 1e6);
  const auto& any = sittings.front().best[0].f;
  fmt::print("environment: {} packages, {:.1f} MB as ferry ships them ({}), {} layers with the workspace; "
             "{} shards, {:.1f} MB of zips per node\n",
             w.packages.size(), shipped / 1e6, names, any.layers(), any.shard_bytes.size(), any.unique_bytes() / 1e6);
  fmt::print("{} warm local nodes; storage: moto_server behind the test proxy's rate limit; env step (pack cached), "
             "best of {} rounds\n",
             w.nodes, rounds);
  fmt::print("  {:<12} {:<4} {:>9}  {:<19} {:>11} {:>12} {:>5} {:>5} {:>9} {:>11}\n", "storage", "fan", "env", "(rounds)",
             "stor/shard", "storage", "stor", "peer", "failed", "link");
  fmt::print("  {:<12} {:<4} {:>9}  {:<19} {:>11} {:>12} {:>5} {:>5} {:>9} {:>11}\n", "", "", "", "", "max / mean",
             "bytes", "fetch", "fetch", "stor/peer", "out");
  for (const auto& s : sittings) {
    print_case(s, false);
    print_case(s, true);
  }
  for (const auto& s : sittings) {
    const double ratio = s.best[0].env / s.best[1].env;
    const int most = s.best[1].f.max_storage();
    fmt::print("{}: env off/on {:.2f}x (goal >= 3x, {}); storage fetches per shard with fan-out at most {} (goal <= 4, "
               "{}), without {}\n",
               rate_name(s.rate), ratio, ratio >= 3 ? "met" : "not met", most, most <= 4 ? "met" : "not met",
               s.best[0].f.max_storage());
    fmt::print("  off: {}\n  on:  {}\n", s.best[0].line, s.best[1].line);
  }
  std::fflush(stdout);  // before the nodes go
  return 0;
}

}  // namespace

int main() { return ferry::bench::bench_main<world>("bench_fanout", run); }
