#pragma once
// The traces a command reads: the files and directories named, or with none the last command's trace
// (tracing/last_trace.hpp) in the directory where every command writes its own, said on stderr. Read on
// the CPU pool; each skipped line is printed as an error naming file:line, and a failure too.
#include "agent/cli/command_context.hpp"
#include "tracing/trace_file.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <vector>

namespace ferry::agent {

boost::asio::awaitable<result<tracing::trace_set>> read_trace_input(command_context& ctx,
                                                                    const std::vector<std::string>& files,
                                                                    diagnostics& diag);

}  // namespace ferry::agent
