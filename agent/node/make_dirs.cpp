#include "agent/node/make_dirs.hpp"

#include <sys/stat.h>

#include <cerrno>

namespace ferry::agent::node {

bool make_dirs(const std::string& path, mode_t mode) {
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const auto part = path.substr(0, slash);
    if (::mkdir(part.c_str(), mode) != 0 && errno != EEXIST) return false;
    if (slash == std::string::npos) return true;
  }
}

}  // namespace ferry::agent::node
