#pragma once
// A tenant's name: who a pool's slots are counted against, and on a shared node the Unix user its commands
// run as. pool.tenant when set, else $USER@host; either becomes a name every Unix accepts (useradd's
// portable rule: lowercase letters, digits, '_' and '-', starting with a letter or '_', at most 32), so that
// "Alice.Smith@Laptop-3" and the user made for it on a node are the same name, "alice_smith-laptop-3".
#include <string>
#include <string_view>

namespace ferry::agent::pool {

// The Unix name of `wanted`: lowercase; '@' and '.' become '-' and '_'; any other character outside
// [a-z0-9_-] is dropped; a name that would start with a digit or '-' gets a leading '_'; cut to 32. Empty
// when nothing of `wanted` is left.
std::string tenant_unix_name(std::string_view wanted);

// The tenant of this agent: `configured` (pool.tenant) when not empty, else `user`@`host`, as a Unix name.
std::string tenant_of(std::string_view configured, std::string_view user, std::string_view host);

// The Unix user a tenant's commands run as on a shared node (agent/node/tenant_user.hpp): "ferry-" and the
// tenant, so that it never takes the name of an account the node already has. A tenant too long for that
// within 32 characters keeps its first 17, then '-' and 8 hex digits of a hash of the whole name, so that
// two long tenants that share a beginning stay two users. Empty for an empty tenant.
std::string tenant_user_name(std::string_view tenant);

}  // namespace ferry::agent::pool
