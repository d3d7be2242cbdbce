#pragma once
// What the first pack of a project ships, said once: the total, the largest layers, and, when most of it
// comes from site-packages that no file of the workspace imports, the advice to use a venv. "First" is
// what storage says: no layer of this pack was there before it (a later pack after an edit reuses the
// stored layers, and says nothing).
//
// The venv rule, from what the pack knows: the workspace's own imports (packaging/python_imports) against
// each site-packages layer's import names (packaging/import_names). A layer none of whose names a
// workspace file imports is unused by the workspace directly (a dependency of what it imports counts as
// unused too, which is why the rule asks for a majority, not for one). The advice comes when such layers
// are most of the site-packages layers and most of the bytes shipped, and the interpreter is not already
// a venv's.
#include "agent/pack/pack_job.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ferry::agent {

struct shipped_summary {
  std::uint64_t bytes = 0;  // of the files, as they land on a node
  std::size_t layers = 0;
  std::vector<std::pair<std::string, std::uint64_t>> largest;  // name and bytes, largest first
  std::size_t site_layers = 0;           // layers from site-packages directories
  std::size_t unimported = 0;            // of those, the ones no workspace file imports a name of
  std::uint64_t unimported_bytes = 0;
  std::vector<std::string> site_dirs;    // the site-packages directories they come from
  bool advise_venv = false;
};

// Nothing of this pack was in storage before it, and it stored something.
bool first_pack(const pack_outcome& packed);

// `workspace_imports` sorted (packaging::imported_names of every workspace file); `in_venv`: the
// interpreter is a venv's (its prefix has a pyvenv.cfg).
shipped_summary summarise_shipped(const packaging::pack_report& r, const std::vector<packaging::root_spec>& roots,
                                  const std::vector<std::string>& workspace_imports, bool in_venv);

// The lines to print (without "ferry: " or a newline).
std::vector<std::string> shipped_lines(const shipped_summary& s);

// Whether the interpreter that was packed runs in a venv.
bool runs_in_venv(const packaging::discovery& found);

// The names the workspace's Python files import, read on the CPU pool.
boost::asio::awaitable<std::vector<std::string>> workspace_imports(net::cpu_pool& cpu, const pack_outcome& packed);

// On a first pack, the summary's lines on stderr (unless -q); nothing otherwise.
boost::asio::awaitable<void> say_first_pack(const command_context& ctx, const pack_outcome& packed);

}  // namespace ferry::agent
