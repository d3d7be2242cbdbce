#pragma once
// A pool tenant's Unix user on a shared node (docs/pool.md, "Tenants on a shared node"): the names the
// node program accepts for one, and its line in /etc/passwd. Pure, so that both halves and the unit tests
// share it; making the user and switching to it are tenant_account.hpp's, the node program's alone.
//
// The node program reads /etc/passwd itself rather than through getpwnam: it is linked statically, and
// glibc's name service would load shared libraries of the node's own glibc.
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace ferry::agent::node {

// The GECOS field of every user the node program makes: a user of a ferry-* name without it is someone
// else's account, which a tenant is never run as.
inline constexpr std::string_view tenant_user_comment = "ferry tenant";

// A name the node program makes a user of: "ferry-" then [a-z0-9_-], 32 characters at most
// (agent/pool/tenant_name.hpp's tenant_user_name). Everything else is refused, "root" above all.
bool tenant_user_ok(std::string_view name);

struct passwd_entry {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string gecos;
  std::string home;
  std::string shell;
};

// The line of `name` in the text of an /etc/passwd; none when no well-formed line names it.
std::optional<passwd_entry> find_passwd(std::string_view passwd, std::string_view name);

// Whether `entry` is a tenant's user that the node program made: its comment, and not root's ids.
bool made_for_tenant(const passwd_entry& entry);

}  // namespace ferry::agent::node
