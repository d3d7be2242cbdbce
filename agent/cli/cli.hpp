#pragma once
// The `ferry` command line: global options, subcommands, configuration, the trace, and the runtime that
// runs the chosen command to its exit code.
namespace ferry::agent {

int run_cli(int argc, char** argv);

}  // namespace ferry::agent
