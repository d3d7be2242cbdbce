#include "agent/node/python_files.hpp"

#include "agent/node/content_dir.hpp"

#include <array>

namespace ferry::agent::node {
namespace {

constexpr std::string_view hook_source =
#include "agent/node/import_hook_source.inc"
    ;

constexpr std::string_view worker_source =
#include "agent/node/python_worker_source.inc"
    ;

}  // namespace

result<std::string> install_python_files(const std::string& cache_dir, diagnostics& diag) {
  const std::array<content_file, 2> files{content_file{"sitecustomize.py", hook_source},
                                          content_file{worker_file, worker_source}};
  return install_content(cache_dir + "/hook", files, diag);
}

}  // namespace ferry::agent::node
