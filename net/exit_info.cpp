#include "net/exit_info.hpp"

#include <fmt/format.h>

namespace ferry::net {

std::string exit_info::describe() const {
  if (status) return fmt::format("exit status {}", *status);
  if (!signal.empty()) return fmt::format("killed by signal {}{}", signal, core_dumped ? " (core dumped)" : "");
  return "no exit status";
}

}  // namespace ferry::net
