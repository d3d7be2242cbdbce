#pragma once
// The names a Python program imports from a layer, read off its file list: the top-level modules and
// packages (`numpy/...`, `six.py`, `_cffi_backend.cpython-311-x86_64-linux-gnu.so`) and the distributions
// whose metadata it holds (`numpy-1.24.2.dist-info/`, `foo.egg-info`), normalised as importlib.metadata
// compares them. A lazily started command's import hook waits for a layer only when a name of it is asked
// for (agent/node/import_gate.hpp); a name that no layer lists falls through at once, so listing a name
// too many costs a wait at most, and one too few would let an import fail: every plausible name is kept.
#include "packaging/layer.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace ferry::packaging {

struct import_names {
  std::vector<std::string> modules;  // sorted, unique
  std::vector<std::string> dists;    // sorted, unique, normalised
};

import_names import_names_of(const layer& l);

// importlib.metadata's normalisation: lower case, each run of '-', '_' and '.' one '_'.
std::string normalise_distribution(std::string_view name);

}  // namespace ferry::packaging
