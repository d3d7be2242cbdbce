#pragma once
// Files that never change once written, in a directory named by their content's digest: the import hook
// (<cache>/hook/<digest>/sitecustomize.py) and a run's site file with its path map
// (<cache>/site/<digest>/site.json and paths.json). Made aside and renamed into place, so that a command
// never sees half of one and two runs may race to make it.
#include "tracing/diagnostics.hpp"

#include <span>
#include <string>
#include <string_view>

namespace ferry::agent::node {

// <parent>/<first 16 hex digits of the SHA-256 of text>/<name> holding `text`, made unless it is there
// already; that directory. errc::cache_failed naming the path when it cannot be made.
result<std::string> install_content(const std::string& parent, std::string_view name, std::string_view text,
                                    diagnostics& diag);

struct content_file {
  std::string_view name;
  std::string_view text;
};

// The same for several files that belong together: the directory is named by the digest of them all
// (names and texts), and is taken as made only when it holds every one.
result<std::string> install_content(const std::string& parent, std::span<const content_file> files,
                                    diagnostics& diag);

}  // namespace ferry::agent::node
