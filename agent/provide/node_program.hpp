#pragma once
// The node program (agent/node/) as the workstation half sees it: the static `ferry-node` binary built
// beside `ferry`, named on a node by its SHA-256 and kept in the node's cache:
//   <cache>/bin/ferry-node-<sha256>
// where <cache> is the plan's cache directory, else ${XDG_CACHE_HOME:-$HOME/.cache}/ferry. A node that
// already has this build gets nothing; one that lacks it gets the bytes on the exec channel's stdin
// (`cat` into a temporary file beside the target), and the copy checks its own SHA-256 before it renames
// itself into place (`ferry-node install`), so a node needs no sha256sum, and a damaged copy is never run
// as the real one.
#include "net/node_link.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <filesystem>
#include <memory>
#include <string>

namespace ferry::agent {

namespace asio = boost::asio;

struct node_program {
  std::filesystem::path local;
  std::string sha256;  // lowercase hex of its bytes
  std::string bytes;   // the program itself, sent to nodes that lack it
};

// Reads and hashes the program: `path`, or, when empty, `ferry-node` beside the running executable.
// errc::node_lacks_tools naming the path when it is missing (a build without it).
result<std::shared_ptr<const node_program>> load_node_program(const std::filesystem::path& path, diagnostics& diag);
// The same, read once per process and path: the program does not change while ferry runs.
result<std::shared_ptr<const node_program>> shared_node_program(const std::filesystem::path& path, diagnostics& diag);

// The node's cache directory as a word for its sh: `cache_dir` quoted, or, when empty, the XDG default
// (${XDG_CACHE_HOME:-$HOME/.cache}/ferry) for the node to expand.
std::string node_cache_word(const std::string& cache_dir);

// A shell line that runs the program with `arguments` on the node when it is there, and otherwise
// exits 127 after printing missing_marker on stderr.
std::string node_program_command(const node_program& program, const std::string& cache_dir,
                                 const std::string& arguments, const std::string& node_path = "");
inline constexpr std::string_view missing_marker = "ferry-node: not installed";

// The shell words that hand a command's argv to the program on the node, to run as a pool tenant's own
// user `user`: `<program> as-tenant USER --` (agent/node/tenant_account.hpp). The program is there: the
// layers' materialise, which always comes first, made sure of it.
std::string as_tenant_words(const node_program& program, const std::string& cache_dir, const std::string& user);

// Puts the program on the node behind `link`. Traced as ferry:node:install.
// `node_path`, when not empty, is the PATH the install runs with.
asio::awaitable<result<void>> install_node_program(tracing::action& parent, net::node_link& link,
                                                   const node_program& program, const std::string& cache_dir,
                                                   const std::string& node_path, diagnostics& diag);

}  // namespace ferry::agent
