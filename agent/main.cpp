#include "agent/cli/cli.hpp"

#include <sys/resource.h>

namespace {

// Each node's SSH session holds two descriptors (Asio's socket and libssh's dup of it): the common soft
// limit of 1,024 would stop a job near 500 nodes. The hard limit is the system's word; the soft one is
// only a default, raised here as far as the hard one allows.
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

int main(int argc, char** argv) {
  raise_descriptor_limit();
  return ferry::agent::run_cli(argc, argv);
}
