#pragma once
// A zip entry's name as a path inside its layer, checked without touching the disk: names are bytes (a
// newline, `;1`, any encoding stay as they are), and a name that is empty, absolute, holds a NUL, an
// empty component, `.` or `..` is refused (errc::hostile_entry). Symlinks are the writer's business
// (layer_writer.hpp), since only the disk knows them.
#include "tracing/diagnostics.hpp"

#include <string_view>
#include <vector>

namespace ferry::agent::node {

struct entry_path {
  std::vector<std::string_view> dirs;  // the parent directories, outermost first
  std::string_view leaf;               // the last component
  bool directory = false;              // the name ended with '/'
};

// `layer` names the layer in the diagnostics. The views point into `name`.
result<entry_path> split_entry_name(std::string_view name, std::string_view layer, diagnostics& diag);

// Whether a relative symlink target, placed at `at`, stays inside the layer (lexically: `..` may not climb
// above the layer's root). Absolute targets never do.
bool link_stays_inside(const entry_path& at, std::string_view target);

}  // namespace ferry::agent::node
