#pragma once
// A file that never changes once written, in a directory named by its content's digest: the import hook
// (<cache>/hook/<digest>/sitecustomize.py) and a run's site file (<cache>/site/<digest>/site.json). Made
// aside and renamed into place, so that a command never sees half of one and two runs may race to make it.
#include "tracing/diagnostics.hpp"

#include <string>
#include <string_view>

namespace ferry::agent::node {

// <parent>/<first 16 hex digits of the SHA-256 of text>/<name> holding `text`, made unless it is there
// already; that directory. errc::cache_failed naming the path when it cannot be made.
result<std::string> install_content(const std::string& parent, std::string_view name, std::string_view text,
                                    diagnostics& diag);

}  // namespace ferry::agent::node
