#pragma once
// A pool tenant's own Unix user on a shared node (docs/pool.md, "Tenants on a shared node"), made on first
// use, and its places: the node program runs as root there (the pool's login user), makes the user, writes
// the layers, and hands the tenant only what is its own.
//
//   /var/cache/ferry/layers/<id>          environment layers, shared by every tenant: root's, 0755/0644, written
//                                         only by the node program after its checks (layer_cache.hpp)
//   /var/cache/ferry/tenants/<user>/      root:<user's group> 0750: the tenant's own layer cache (its workspace
//                                         layers, each chowned to it), its site file, hook and empty workdir
//   /home/<user>                          its home, 0700
//
// `ferry-node as-tenant USER -- ARGV` execs ARGV as that user (task_command.hpp puts it before the
// command): the same process, so that its exit status and signals stay the command's own.
#include "agent/node/tenant_user.hpp"
#include "tracing/diagnostics.hpp"

#include <string>

namespace ferry::agent::node {

// Where a tenant-mode materialise keeps the shared environment layers when the plan names no cache.
inline constexpr std::string_view shared_cache_dir = "/var/cache/ferry";

// As root: the user `name`, made now when it is missing (useradd, under a lock against another run making
// it at once). errc::tenant_failed when this program is not root, `name` is not a tenant's name
// (tenant_user_ok), useradd fails, or the name belongs to an account the node program did not make.
result<passwd_entry> ensure_tenant_user(const std::string& name, diagnostics& diag);

// The tenant's own directory below `shared` (made when missing): root-owned, of the user's group, 0750,
// so that the tenant reads it and nobody else does, and only the node program writes its entries.
result<std::string> tenant_dir(const std::string& shared, const passwd_entry& user, diagnostics& diag);

// Gives the tree at `path` to the user (no symlink followed): a workspace layer the command works in.
result<void> give_tree(const std::string& path, const passwd_entry& user, diagnostics& diag);

// As root: this process becomes the user `name` (made when missing: ensure_tenant_user), its group alone,
// for good. The staging of a tenant's data does its work so (stage_plan.hpp).
result<passwd_entry> become_tenant(const std::string& name, diagnostics& diag);

// `ferry-node as-tenant USER -- ARGV`: becomes the user (its group only, its HOME, USER and LOGNAME) and
// execs ARGV. Returns only when it could not: 126/127 as sh says a command it cannot run, 1 otherwise,
// the reason on stderr.
int exec_as_tenant(const std::string& name, char** argv);

}  // namespace ferry::agent::node
