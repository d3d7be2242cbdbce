#pragma once
// What every command receives: the effective configuration, its trace action, and the runtime.
#include "config/loader.hpp"
#include "net/offload.hpp"
#include "tracing/action.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace ferry::agent {

struct global_options {
  std::string config_file;
  std::string trace_file;
  int verbosity = 0;  // -v raises, -q lowers
  // The words after the first `--`, verbatim: the user's command (`ferry exec -- CMD ARGS...`). The
  // command-line parser never sees them, so their dashes and brackets are theirs.
  std::vector<std::string> command;
};

struct command_context {
  const config::loaded_config& config;
  const global_options& options;
  tracing::action& trace;  // the command's own action: every step nests inside it
  net::cpu_pool& cpu;
  boost::asio::any_io_executor io;
  bool interactive = false;  // stdout is a terminal: progress bars and colour
};

}  // namespace ferry::agent
