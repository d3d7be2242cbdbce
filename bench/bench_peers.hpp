#pragma once
// What the benches that race ferry against rsync over ssh share: fresh local nodes and their ssh
// addresses, the workstation's uplink (the test proxy's rate, one link shared by every connection), and
// running one peer on every node at once.
#include "bench/bench_support.hpp"
#include "support/fault_proxy.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

namespace ferry::bench {

inline double seconds_of(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return seconds_since(start);
}

struct node_address {
  std::string host;
  std::string port;
};

// The workstation's uplink: a proxy per peer it talks to, all sharing one link of `rate` bytes/s.
struct uplink {
  std::uint64_t rate = 0;  // 0: no uplink, everything direct
  std::vector<std::unique_ptr<ferry::test::fault_proxy>> proxies;

  // Where to connect to reach host:port over the uplink.
  node_address through(const std::string& host, const std::string& port) {
    if (rate == 0) return {host, port};
    auto p = std::make_unique<ferry::test::fault_proxy>(host, static_cast<std::uint16_t>(std::stoi(port)));
    if (proxies.empty())
      p->set_rate(rate);
    else
      p->share_link_with(*proxies.front());
    node_address out{"127.0.0.1", std::to_string(p->port())};
    proxies.push_back(std::move(p));
    return out;
  }

  std::vector<node_address> through(const std::vector<node_address>& nodes) {
    std::vector<node_address> out;
    for (const auto& n : nodes) out.push_back(through(n.host, n.port));
    return out;
  }
};

// ssh with ferry's key (under the world's XDG_CONFIG_HOME), no host checks, the cheap key exchange.
inline std::string ssh_with_key(const std::filesystem::path& xdg_config_home) {
  return fmt::format("ssh -i {} -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                     "-o LogLevel=ERROR -o KexAlgorithms=curve25519-sha256 -o BatchMode=yes",
                     quote(xdg_config_home / "ferry" / "id_ed25519"));
}

// `count` fresh local nodes (nothing in their caches): every node of the registry ended first.
inline std::vector<node_address> fresh_local_nodes(const std::string& ferry, int count) {
  std::system(fmt::format("{} -q nodes down --all > /dev/null 2>&1", quote(ferry)).c_str());
  shell(fmt::format("{} -q nodes up {} > /dev/null", quote(ferry), count));
  const auto registry = output_of(fmt::format("{} nodes ls", quote(ferry)));
  std::vector<node_address> out;
  const std::regex address("(10\\.200\\.[0-9.]+):([0-9]+)");
  for (std::sregex_iterator it(registry.begin(), registry.end(), address), end; it != end; ++it)
    out.push_back({(*it)[1].str(), (*it)[2].str()});
  if (out.size() != static_cast<std::size_t>(count))
    throw std::runtime_error(fmt::format("expected {} nodes:\n{}", count, registry));
  return out;
}

// A cold hash cache: what ferry knows of the workstation's files (hashes, zip digests, the discovery answer)
// forgotten, under the world's dir (its XDG_CACHE_HOME).
inline void cold_hash_cache(const std::filesystem::path& world_dir) {
  for (const char* f : {"hashes.bin", "zip-digests", "discovery.json"})
    std::filesystem::remove(world_dir / "XDG_CACHE_HOME" / "ferry" / f);
}

// Storage (moto at `endpoint`) behind the uplink for the workstation (ferry and the aws CLI), directly for
// the nodes, as in one cloud region. Returns the endpoint as the nodes reach it.
inline std::string storage_behind_uplink(uplink& link, const std::string& endpoint) {
  if (link.rate == 0) return endpoint;
  const auto colon = endpoint.rfind(':');
  const auto at = link.through("10.200.0.1", endpoint.substr(colon + 1));
  ::setenv("AWS_ENDPOINT_URL", fmt::format("http://{}:{}", at.host, at.port).c_str(), 1);
  ::setenv("FERRY_STORAGE_NODE_ENDPOINT", endpoint.c_str(), 1);
  return endpoint;
}

// The site-packages (purelib) of a Python interpreter.
inline std::string site_packages_of(const std::string& python) {
  return first_line(output_of(fmt::format("{} -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'", python)));
}

// `python3 main.py` on a node, in a copy the peer made at `dir` of a workspace beside its .venv (of Python
// 3.11, the nodes' python3): the venv's site-packages on PYTHONPATH, the output dropped.
inline std::string python_main_in(const std::string& ssh, const node_address& n, const std::string& dir) {
  return fmt::format("{} -p {} root@{} 'cd {} && PYTHONPATH={}/.venv/lib/python3.11/site-packages python3 main.py' "
                     "> /dev/null",
                     ssh, n.port, n.host, dir, dir);
}

// Background jobs that each added their pid to $p, waited for one by one: any failure fails the line.
inline std::string all_of(const std::string& jobs) { return "p=; " + jobs + "for j in $p; do wait $j || exit 1; done"; }

// `rsync FLAGS` of `source` to every node at once, each into `dir`-<i> of its own (local nodes share this
// filesystem), then `then(node, that dir)` on it: a shell line run over ssh when the copy is done.
inline double rsync_to_all(const std::string& ssh, const std::vector<node_address>& nodes,
                           const std::filesystem::path& source, const std::string& dir, const std::string& flags,
                           const std::function<std::string(const node_address&, const std::string&)>& then) {
  return seconds_of([&] {
    std::string jobs;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto& n = nodes[i];
      const auto d = fmt::format("{}-{}", dir, i);
      jobs += fmt::format("( rsync {} -e \"{} -p {}\" {}/ root@{}:{}/ && {} ) & p=\"$p $!\"; ", flags, ssh, n.port,
                          quote(source), n.host, d, then(n, d));
    }
    shell(all_of(jobs));
  });
}

}  // namespace ferry::bench
