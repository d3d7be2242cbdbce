#pragma once
// `mkdir -p` for the node program's own directories (cache, state, staging): every missing directory
// of an absolute path is made with `mode` (less the umask); one that exists already is fine.
#include <sys/types.h>

#include <string>

namespace ferry::agent::node {

// False with errno set when a directory could not be made.
bool make_dirs(const std::string& path, mode_t mode);

}  // namespace ferry::agent::node
