#pragma once
// The rule for a team pool's name (pool.name), in one place for the configuration's check and the pool's
// own (agent/pool/pool_store.hpp): the name becomes a prefix in storage, PREFIX/pools/NAME/, which a '/'
// or ".." would leave.
#include <string>
#include <string_view>

namespace ferry::config {

// Empty when `name` may name a pool: letters, digits, '.', '_' and '-', 1 to 64 of them, not "." or "..";
// otherwise what is wrong with it, for a person.
std::string pool_name_problem(std::string_view name);

}  // namespace ferry::config
