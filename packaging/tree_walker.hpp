#pragma once
// Lists the files of one directory tree the way a layer will hold them: relative paths as raw bytes,
// sorted, with the stat fields that key the hash cache. Synchronous (the walk is system calls and
// pattern matching); callers run independent subtrees on the CPU pool in parallel.
//
// What it does with things that are not plain files (each documented in docs/packing.md, Odd files):
// - excluded paths (ignore_rules) are not entered; directories themselves are not entries, so an empty
//   directory does not travel;
// - a symlink with a relative target that stays inside `root` is kept as a symlink; one that leaves it,
//   or has an absolute target, is followed or refused (errc::external_symlink) per `follow_external`;
//   inside a followed directory every symlink is followed, and coming back to a directory that is being
//   walked is errc::symlink_loop, as is a link that cannot be resolved for looping;
// - a dangling symlink is kept as a symlink, with a warning;
// - sockets, FIFOs and devices are skipped with a warning;
// - a file that vanishes between listing its directory and looking at it was never there;
// - a directory that cannot be read is errc::unreadable_file, naming it.
#include "packaging/file_entry.hpp"
#include "packaging/ignore_rules.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace ferry::packaging {

struct walk_options {
  ignore_options ignore;
  bool read_ignore_files = true;  // .gitignore and .ferryignore (not inside site-packages)
  bool follow_external = true;    // packaging.external_symlinks = "follow"
  std::uint64_t large_file_warning = 100ull << 20;
};

struct walk_warning {
  std::string path;  // relative to the root
  std::string message;
};

struct walk_result {
  std::vector<file_entry> files;  // sorted by path bytes
  std::vector<walk_warning> warnings;
  std::uint64_t bytes = 0;
};

// Walks `root`. With `only` non-empty, just those top-level names of it (files or directories), so the
// top-level packages of a site-packages directory can be walked in parallel; paths stay relative to root.
result<walk_result> walk_tree(const std::filesystem::path& root, const walk_options& options, diagnostics& diag,
                              std::span<const std::string> only = {});

// The names directly in `root` with whether each is a directory (symlinks resolved), unsorted.
result<std::vector<std::pair<std::string, bool>>> list_top_level(const std::filesystem::path& root,
                                                                 diagnostics& diag);

// Why a path is in or out, for `ferry pack --explain`: "included", or the deciding rule.
result<std::string> explain_path(const std::filesystem::path& root, std::string_view relative_path,
                                 const walk_options& options, diagnostics& diag);

}  // namespace ferry::packaging
