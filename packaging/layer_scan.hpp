#pragma once
// From shipped sys.path roots to sealed layers: walk every root on the CPU pool, group site-packages
// files by distribution, look every file up in the hash cache, hash only the misses (in parallel), and
// give each layer and shard its id. Nothing here touches the network.
#include "net/offload.hpp"
#include "packaging/hash_cache.hpp"
#include "packaging/layer.hpp"
#include "packaging/tree_walker.hpp"
#include "tracing/action.hpp"

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <filesystem>
#include <span>
#include <vector>

namespace ferry::packaging {

namespace asio = boost::asio;

struct root_spec {
  enum class kind { workspace, site_packages, other };
  std::filesystem::path path;
  kind type = kind::workspace;
  std::size_t index = 0;  // position among the shipped roots, in sys.path order
};

struct scan_options {
  ignore_options ignore;       // for the workspace and other directories; site-packages get the defaults only
  bool follow_external = true;
  std::uint64_t large_file_warning = 100ull << 20;
  std::uint64_t shard_size = 128ull << 20;
  std::size_t threads = 1;     // hashing and walking jobs at once (the pool's size, or packaging.hash_threads)
};

// Counters a progress bar reads while the scan runs on other threads.
struct scan_progress {
  std::atomic<std::uint64_t> files_found{0};
  std::atomic<std::uint64_t> bytes_found{0};
  std::atomic<std::uint64_t> files_to_hash{0};
  std::atomic<std::uint64_t> bytes_to_hash{0};
  std::atomic<std::uint64_t> files_hashed{0};
  std::atomic<std::uint64_t> bytes_hashed{0};
};

struct scan_result {
  std::vector<layer> layers;  // root order, then name order within a site-packages root
  std::vector<walk_warning> warnings;  // paths prefixed with their root
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
  std::uint64_t hashed_files = 0;  // cache misses that were read
  std::uint64_t hashed_bytes = 0;
};

asio::awaitable<result<scan_result>> scan_layers(tracing::action& parent, net::cpu_pool& pool,
                                                 std::span<const root_spec> roots, const scan_options& options,
                                                 hash_cache& cache, scan_progress* progress, diagnostics& diag);

}  // namespace ferry::packaging
