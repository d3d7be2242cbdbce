#include "packaging/layer_scan.hpp"

#include "net/cancellation.hpp"
#include "net/run_all.hpp"
#include "packaging/error.hpp"
#include "packaging/file_hash.hpp"
#include "packaging/site_packages.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

namespace ferry::packaging {
namespace {

// One unit of walking: a whole root, or one top-level name of a site-packages root.
struct walk_job {
  const root_spec* root = nullptr;
  std::string top_level;  // empty: the whole root
  walk_result walked;
  std::vector<std::pair<std::string, std::string>> records;  // (dist-info dir, RECORD text)
};

// The first failure of concurrent jobs, kept with its diagnostics; later ones are dropped.
struct first_error {
  std::mutex mutex;
  error_code ec;
  diagnostics diag;
  std::atomic<bool> failed{false};

  void set(const error_code& e, diagnostics& d) {
    std::lock_guard lock(mutex);
    if (ec) return;
    ec = e;
    diag = std::move(d);
    failed = true;
  }
};

std::string read_small_file(const std::filesystem::path& file) {
  std::string text;
  const int fd = open_for_reading(file);
  if (fd < 0) return text;
  char buffer[16384];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return text;
}

walk_options walk_options_for(const root_spec& root, const scan_options& options) {
  walk_options w;
  w.follow_external = options.follow_external;
  w.large_file_warning = options.large_file_warning;
  if (root.type == root_spec::kind::site_packages) {
    // Installed packages: ferry's defaults only; a project's ignore files and excludes speak of the project.
    w.read_ignore_files = false;
  } else {
    w.ignore = options.ignore;
  }
  return w;
}

// A regular file's digest from the cache; a file cut into pieces (layer.hpp) only with all of its pieces'.
void digest_from_cache(file_entry& f, const hash_cache& cache) {
  auto digest = cache.find(f.key);
  if (!digest) return;
  const auto pieces = piece_count(f.key.size);
  std::vector<sha256_digest> found;
  found.reserve(pieces);
  for (std::uint32_t k = 1; k <= pieces; ++k) {
    auto piece = cache.find(f.key, k);
    if (!piece) return;
    found.push_back(*piece);
  }
  f.digest = *digest;
  f.piece_digests = std::move(found);
}

// Runs on the pool: walks, then fills digests from the cache, and reads RECORD files.
void run_walk_job(walk_job& job, const scan_options& options, const hash_cache& cache, scan_progress* progress,
                  first_error& failure) {
  if (failure.failed) return;
  diagnostics d;
  const auto w = walk_options_for(*job.root, options);
  std::vector<std::string> only;
  if (!job.top_level.empty()) only.push_back(job.top_level);
  auto walked = walk_tree(job.root->path, w, d, only);
  if (!walked) {
    failure.set(walked.error(), d);
    return;
  }
  job.walked = std::move(*walked);
  for (auto& f : job.walked.files) {
    if (f.type == file_entry::kind::symlink) {
      f.digest = net::sha256(f.link_target);  // a link's content is its target: nothing to read
    } else {
      digest_from_cache(f, cache);
      // What each distribution owns: a wheel's RECORD, or an egg's top-level names (Debian's packages and
      // older installs have no RECORD).
      const bool owns = f.path.ends_with(".dist-info/RECORD") || f.path.ends_with(".egg-info/top_level.txt");
      if (owns && std::count(f.path.begin(), f.path.end(), '/') == 1) {
        job.records.emplace_back(f.path.substr(0, f.path.find('/')), read_small_file(f.source));
      }
    }
  }
  if (progress) {
    progress->files_found += job.walked.files.size();
    progress->bytes_found += job.walked.bytes;
  }
}

asio::awaitable<result<std::vector<walk_job>>> plan_jobs(net::cpu_pool& pool, std::span<const root_spec> roots,
                                                         diagnostics& diag) {
  std::vector<walk_job> jobs;
  for (const auto& root : roots) {
    if (root.type != root_spec::kind::site_packages) {
      jobs.push_back({&root, {}, {}, {}});
      continue;
    }
    diagnostics d;
    auto names = co_await net::offload(pool, [&] { return list_top_level(root.path, d); });
    if (!names) {
      diag = std::move(d);
      co_return names.error();
    }
    for (auto& [name, is_dir] : *names) jobs.push_back({&root, std::move(name), {}, {}});
  }
  co_return jobs;
}

// Runs `count` items on up to `threads` pool threads; each thread makes its own worker (its scratch
// buffers) with `make_worker` and pulls the next index until none is left.
using item_worker = std::function<void(std::size_t)>;

asio::awaitable<void> for_each_on_pool(net::cpu_pool& pool, std::size_t count, std::size_t threads,
                                       std::function<item_worker()> make_worker) {
  if (count == 0) co_return;
  auto next = std::make_shared<std::atomic<std::size_t>>(0);
  std::vector<asio::awaitable<void>> workers;
  for (std::size_t t = 0; t < std::max<std::size_t>(1, std::min(threads, count)); ++t) {
    workers.push_back([](net::cpu_pool& p, std::shared_ptr<std::atomic<std::size_t>> n, std::size_t total,
                         std::function<item_worker()> make) -> asio::awaitable<void> {
      co_await net::accept_cancellation();
      co_await net::offload(p, [&] {
        auto work = make();
        for (std::size_t i; (i = n->fetch_add(1)) < total;) work(i);
      });
    }(pool, next, count, make_worker));
  }
  co_await net::run_all(std::move(workers));
}

// Groups the walked files into layers: one per workspace/other root, one per distribution in site-packages.
std::vector<layer> group_layers(std::vector<walk_job>& jobs, std::span<const root_spec> roots) {
  std::vector<layer> layers;
  for (const auto& root : roots) {
    if (root.type != root_spec::kind::site_packages) {
      layer l;
      l.name = root.type == root_spec::kind::workspace ? "workspace" : "path:" + root.path.string();
      l.root_index = root.index;
      for (auto& job : jobs) {
        if (job.root == &root) l.files = std::move(job.walked.files);
      }
      layers.push_back(std::move(l));
      continue;
    }
    distribution_index index;
    for (auto& job : jobs) {
      if (job.root != &root) continue;
      for (auto& [dir, text] : job.records) index.add_record(dir, text);
    }
    std::map<std::string, layer> by_name;
    for (auto& job : jobs) {
      if (job.root != &root) continue;
      for (auto& f : job.walked.files) {
        auto& l = by_name[index.group_of(f.path)];
        l.files.push_back(std::move(f));
      }
    }
    for (auto& [name, l] : by_name) {
      l.name = name;
      l.root_index = root.index;
      std::sort(l.files.begin(), l.files.end(), [](const file_entry& a, const file_entry& b) { return a.path < b.path; });
      layers.push_back(std::move(l));
    }
  }
  return layers;
}

// One unit of hashing: a whole file, or one piece of a file over piece_size (so the pieces of one large
// file are hashed on every thread at once).
struct hash_item {
  file_entry* file = nullptr;
  std::uint32_t piece = 0;  // 1-based; 0: the whole file
  std::size_t cut = 0;      // for a piece: index into the cut files' counters
};

// The pieces of a cut file still being hashed; the thread that hashes the last one sets the root.
struct cut_files {
  std::unique_ptr<std::atomic<std::uint64_t>[]> left;
};

void record_digest(const hash_item& item, const sha256_digest& digest, cut_files& cuts, hash_cache& cache) {
  auto& f = *item.file;
  const bool racy = is_racy(f.key.mtime_ns);
  if (item.piece == 0) {
    f.digest = digest;
    if (f.type == file_entry::kind::regular) cache.insert(f.key, f.digest, racy);
    return;
  }
  f.piece_digests[item.piece - 1] = digest;
  cache.insert(f.key, digest, racy, item.piece);
  // acq_rel: the last one sees every other thread's piece digest.
  if (cuts.left[item.cut].fetch_sub(1, std::memory_order_acq_rel) == 1) {
    f.digest = piece_root(f.piece_digests);
    cache.insert(f.key, f.digest, racy);
  }
}

std::vector<hash_item> hash_items(std::span<file_entry* const> missing, cut_files& cuts) {
  std::vector<hash_item> items;
  std::size_t cut_count = 0;
  for (auto* f : missing) cut_count += f->type == file_entry::kind::regular && piece_count(f->key.size) > 0;
  cuts.left = std::make_unique<std::atomic<std::uint64_t>[]>(cut_count);
  std::size_t cut = 0;
  for (auto* f : missing) {
    const auto pieces = f->type == file_entry::kind::regular ? piece_count(f->key.size) : 0;
    if (pieces == 0) {
      items.push_back({f, 0, 0});
      continue;
    }
    f->piece_digests.assign(pieces, sha256_digest{});
    cuts.left[cut].store(pieces);
    for (std::uint32_t k = 1; k <= pieces; ++k) items.push_back({f, k, cut});
    ++cut;
  }
  return items;
}

// Hashes the files of one layer that the cache did not know, spread over the pool.
asio::awaitable<result<void>> hash_layer(tracing::action& parent, net::cpu_pool& pool, layer& l,
                                         const scan_options& options, hash_cache& cache, scan_progress* progress,
                                         scan_result& totals, diagnostics& diag) {
  std::vector<file_entry*> missing;
  std::uint64_t missing_bytes = 0;
  for (auto& f : l.files) {
    if (f.digest == sha256_digest{}) {
      missing.push_back(&f);
      missing_bytes += f.key.size;
    }
  }
  auto act = parent.child(action_types::packaging::hash,
                          {{"layer", l.name}, {"files", l.files.size()}, {"to_hash", missing.size()},
                           {"to_hash_bytes", missing_bytes}});
  cut_files cuts;
  const auto items = hash_items(missing, cuts);
  auto failure = std::make_shared<first_error>();
  // Small layers are one job; a big one is split so every thread helps.
  const std::size_t threads = missing_bytes > (8u << 20) ? options.threads : 1;
  // Named, not a temporary in the co_await: GCC 12 destroys such temporaries twice.
  std::function<item_worker()> make_worker = [&, failure]() -> item_worker {
    auto buffer = std::make_shared<std::vector<char>>(1 << 20);
    auto hasher = std::make_shared<net::sha256_stream>();
    return [&, failure, buffer, hasher](std::size_t i) {
      if (failure->failed) return;
      diagnostics d;
      const auto& item = items[i];
      auto& f = *item.file;
      const auto offset = item.piece == 0 ? 0 : (item.piece - 1) * piece_size;
      const auto length = item.piece == 0 ? f.key.size : std::min(piece_size, f.key.size - offset);
      auto digest = item.piece == 0 ? hash_entry(f, *hasher, *buffer, d)
                                    : hash_range(f, offset, length, *hasher, *buffer, d);
      if (!digest) {
        failure->set(digest.error(), d);
        return;
      }
      record_digest(item, *digest, cuts, cache);
      if (progress) {
        progress->files_hashed += item.piece <= 1 ? 1 : 0;
        progress->bytes_hashed += length;
      }
    };
  };
  co_await for_each_on_pool(pool, items.size(), threads, std::move(make_worker));
  if (co_await net::cancelled()) {
    act.fail(asio::error::operation_aborted, "cancelled");
    co_return error_code(asio::error::operation_aborted);
  }
  if (failure->ec) {
    diag = std::move(failure->diag);
    act.fail(failure->ec, diag);
    co_return failure->ec;
  }
  totals.hashed_files += missing.size();
  totals.hashed_bytes += missing_bytes;
  act.succeed();
  co_return result<void>{};
}

// What the layer-hashing coroutines share; they all run on the caller's executor, one at a time.
struct hash_queue {
  std::size_t next = 0;
  error_code first;
  diagnostics diag;
};

asio::awaitable<void> hash_worker(tracing::action& parent, net::cpu_pool& pool, scan_result& out,
                                  const scan_options& options, hash_cache& cache, scan_progress* progress,
                                  hash_queue& queue) {
  co_await net::accept_cancellation();
  while (!queue.first && queue.next < out.layers.size()) {
    auto& l = out.layers[queue.next++];
    diagnostics d;
    auto r = co_await hash_layer(parent, pool, l, options, cache, progress, out, d);
    if (!r && !queue.first) {
      queue.first = r.error();
      queue.diag = std::move(d);
    }
  }
}

// Layers are hashed `threads` at a time, so many small layers keep every thread busy too.
asio::awaitable<result<void>> hash_all(tracing::action& parent, net::cpu_pool& pool, scan_result& out,
                                       const scan_options& options, hash_cache& cache, scan_progress* progress,
                                       diagnostics& diag) {
  hash_queue queue;
  std::vector<asio::awaitable<void>> workers;
  for (std::size_t t = 0; t < std::max<std::size_t>(1, options.threads); ++t) {
    workers.push_back(hash_worker(parent, pool, out, options, cache, progress, queue));
  }
  co_await net::run_all(std::move(workers));
  if (queue.first) {
    diag = std::move(queue.diag);
    co_return queue.first;
  }
  co_return result<void>{};
}

}  // namespace

asio::awaitable<result<scan_result>> scan_layers(tracing::action& parent, net::cpu_pool& pool,
                                                 std::span<const root_spec> roots, const scan_options& options,
                                                 hash_cache& cache, scan_progress* progress, diagnostics& diag) {
  auto walk_act = parent.child(action_types::packaging::walk, {{"roots", roots.size()}});
  auto jobs = co_await plan_jobs(pool, roots, diag);
  if (!jobs) {
    walk_act.fail(jobs.error(), diag);
    co_return jobs.error();
  }
  auto failure = std::make_shared<first_error>();
  // Named, not a temporary in the co_await: GCC 12 destroys such temporaries twice.
  std::function<item_worker()> make_worker = [&, failure]() -> item_worker {
    return [&, failure](std::size_t i) { run_walk_job((*jobs)[i], options, cache, progress, *failure); };
  };
  co_await for_each_on_pool(pool, jobs->size(), options.threads, std::move(make_worker));
  if (co_await net::cancelled()) failure->set(asio::error::operation_aborted, diag);
  if (failure->ec) {
    diag = std::move(failure->diag);
    walk_act.fail(failure->ec, diag);
    co_return failure->ec;
  }
  scan_result out;
  for (auto& job : *jobs) {
    for (auto& w : job.walked.warnings) {
      out.warnings.push_back({(job.root->path / w.path).string(), std::move(w.message)});
    }
  }
  out.layers = group_layers(*jobs, roots);
  for (const auto& l : out.layers) {
    out.files += l.files.size();
    for (const auto& f : l.files) out.bytes += f.key.size;
  }
  walk_act.succeed({{"files", out.files}, {"bytes", out.bytes}, {"layers", out.layers.size()},
                    {"cache_hits", cache.hits()}});
  if (progress) {
    for (const auto& l : out.layers) {
      for (const auto& f : l.files) {
        if (f.digest == sha256_digest{}) {
          progress->files_to_hash += 1;
          progress->bytes_to_hash += f.key.size;
        }
      }
    }
  }

  if (auto r = co_await hash_all(parent, pool, out, options, cache, progress, diag); !r) co_return r.error();
  co_await net::offload(pool, [&] {
    for (auto& l : out.layers) seal_layer(l, options.shard_size);
  });
  co_return out;
}

}  // namespace ferry::packaging
