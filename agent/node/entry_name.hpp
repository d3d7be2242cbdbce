#pragma once
// A zip entry's name as a path inside its layer, checked without touching the disk: names are bytes (a
// newline, `;1`, any encoding stay as they are), and a name that is empty, absolute, holds a NUL, an
// empty component, `.` or `..`, or is longer than a path may be, is refused (errc::hostile_entry). Symlinks are the writer's business
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

// Whether a relative symlink target, placed at `at`, stays inside the layer whatever other links the layer
// holds: its `..` components all come first and climb no higher than the layer's root, and the names after
// them only descend. (A `..` after a name could climb out through another link: `l1 -> loop/..` with
// `loop -> .`.) Since every link's own directory is a real one (no entry passes through a link), each
// step of a resolution stays inside. Absolute targets never do.
bool link_stays_inside(const entry_path& at, std::string_view target);

// A name for a message: control bytes, backslashes and bytes that are not UTF-8 as \xNN, so a name
// cannot forge a line, cut a message at a NUL or make the trace's JSON invalid.
std::string printable_name(std::string_view name);

}  // namespace ferry::agent::node
