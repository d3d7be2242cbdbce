#pragma once
// The Python that ships inside the node program, so that its version always matches ferry's: the import
// hook (import_hook/sitecustomize.py, which makes the node's sys.path the workstation's) and the worker of
// the Python API (python/ferry/_worker.py, which runs task after task for `ferry api`). Both go into one
// directory named by their digest: <cache>/hook/<digest>/.
#include "tracing/diagnostics.hpp"

#include <string>

namespace ferry::agent::node {

// The file name of the worker inside that directory: not a name a user's import would look for.
inline constexpr const char* worker_file = "_ferry_worker.py";

// Writes both files into <cache_dir>/hook/<digest>/ unless they are there; that directory.
result<std::string> install_python_files(const std::string& cache_dir, diagnostics& diag);

}  // namespace ferry::agent::node
