#pragma once
// Where each of a plan's layers lives on the node. Without a tenant: the node's one layer cache, as ever.
// With a pool tenant (plan_header::tenant, tenant_account.hpp): the environment layers in the node's
// shared cache, readable by every tenant and written only here, after the checks; the workspace's layers
// (named "workspace" by the pack: packaging/layer_scan.cpp) in the tenant's own cache, each handed to
// its user once whole; and the plan's other files (site, hook, empty workdir) in the tenant's own
// directory too. The same calls as layer_cache's, by layer id, so the materialise code need not care.
#include "agent/node/layer_cache.hpp"
#include "agent/node/tenant_user.hpp"

#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace ferry::agent::node {

class layer_places {
 public:
  // The node's own cache.
  explicit layer_places(layer_cache shared) : shared_(std::move(shared)) {}
  // A tenant's: `own` is below its directory, `user` the one its workspace is handed to.
  layer_places(layer_cache shared, layer_cache own, passwd_entry user)
      : shared_(std::move(shared)), own_(std::move(own)), user_(std::move(user)) {}

  // A layer line or catalogue entry: a workspace layer of a tenant's plan is the tenant's own.
  void note(std::string_view id, std::string_view name);

  // Where the plan's own files go: the tenant's directory, or the node's cache.
  const std::string& dir() const { return own_ ? own_->dir() : shared_.dir(); }
  const std::string& shared_dir() const { return shared_.dir(); }
  const passwd_entry* user() const { return user_ ? &*user_ : nullptr; }

  std::string layer_dir(std::string_view id) const { return of(id).layer_dir(id); }
  bool cached(std::string_view id) const { return of(id).cached(id); }
  void touch(std::string_view id) const { of(id).touch(id); }
  result<packaging::unique_fd> try_lock(std::string_view id, diagnostics& diag) const { return of(id).try_lock(id, diag); }
  result<std::string> make_temp(std::string_view id, diagnostics& diag) const { return of(id).make_temp(id, diag); }
  // A tenant's own layer is its user's before it takes its place (it works in it: its cwd).
  result<void> commit(std::string_view id, const std::string& temp, std::uint64_t disk_bytes, diagnostics& diag) const;
  void remove(const std::string& path) const { shared_.remove(path); }
  // Both caches, each against the cap.
  std::vector<evicted_layer> evict(std::uint64_t cap, const std::set<std::string>& keep) const;

 private:
  bool own(std::string_view id) const { return own_ && own_ids_.contains(std::string(id)); }
  const layer_cache& of(std::string_view id) const { return own(id) ? *own_ : shared_; }

  layer_cache shared_;
  std::optional<layer_cache> own_;
  std::optional<passwd_entry> user_;
  std::set<std::string> own_ids_;
};

}  // namespace ferry::agent::node
