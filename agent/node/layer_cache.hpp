#pragma once
// The node's layer cache, on disk:
//   <cache>/layers/<id>/         a layer's files, present once whole
//   <cache>/layers/<id>.done     its marker: written (renamed into place) only after the directory was
//                                renamed into place; holds the layer's size on disk; its mtime is its last use
//   <cache>/layers/<id>.lock     the layer's lock (flock): held while the layer is made or evicted
//   <cache>/layers/<id>.tmp.*    a layer being made; a stale one (its maker died) is removed under the lock
// A layer is cached exactly when its marker exists. Locks are per layer, so two runs on one node wait only
// for the layers they share. Everything is made with the node user's umask, as plain files: no tool but the
// node program touches it. A cache that pool tenants read (tenant_account.hpp) has its layers directory
// 0755 under a umask of 022: every tenant reads the layers, only the node program (root) writes them.
#include "packaging/unique_fd.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <set>
#include <sys/types.h>
#include <string>
#include <vector>

namespace ferry::agent::node {

struct evicted_layer {
  std::string id;
  std::uint64_t disk_bytes = 0;
};

class layer_cache {
 public:
  // Creates <dir>/layers when missing, and gives it `mode` (what is missing above it too). `dir` empty:
  // ${XDG_CACHE_HOME:-$HOME/.cache}/ferry.
  static result<layer_cache> open(std::string dir, diagnostics& diag, mode_t mode = 0700);

  const std::string& dir() const { return dir_; }
  std::string layer_dir(std::string_view id) const;

  bool cached(std::string_view id) const;
  // Marks a cached layer as just used.
  void touch(std::string_view id) const;
  // Takes the layer's lock if nobody holds it: an open descriptor, or none (-1) while another holds it.
  result<packaging::unique_fd> try_lock(std::string_view id, diagnostics& diag) const;

  // Under the layer's lock: removes what a dead maker left, and makes an empty temporary directory.
  result<std::string> make_temp(std::string_view id, diagnostics& diag) const;
  // Under the lock: the temporary directory becomes the layer, then its marker records `disk_bytes`.
  result<void> commit(std::string_view id, const std::string& temp, std::uint64_t disk_bytes, diagnostics& diag) const;
  // Removes a directory tree without following any symlink in it.
  void remove(const std::string& path) const;

  // Evicts least recently used layers, never one in `keep` or one locked by another run, until the cached
  // layers take at most `cap` bytes.
  std::vector<evicted_layer> evict(std::uint64_t cap, const std::set<std::string>& keep) const;

 private:
  explicit layer_cache(std::string dir) : dir_(std::move(dir)), layers_(dir_ + "/layers") {}
  std::string dir_;
  std::string layers_;
};

// Removes `name` below the directory `parent` and everything in it, following no symlink.
void remove_tree(int parent, const char* name);

}  // namespace ferry::agent::node
