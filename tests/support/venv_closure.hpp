#pragma once
// A venv that holds Dask as an installed one would: links into Debian's python3-distributed for distributed
// and every top-level package (with its metadata directory) that importing its scheduler, worker and
// nanny loads. Shared by the cluster tests and bench: ferry ships the venv's site-packages, so the nodes
// run Dask from the shipped layers.
#include <filesystem>
#include <string>

namespace ferry::test {

inline constexpr const char* dask_closure_script = R"(
import sys, os
import distributed, distributed.cli.dask_scheduler, distributed.cli.dask_worker, distributed.nanny
root = '/usr/lib/python3/dist-packages/'
names = set()
for m in list(sys.modules.values()):
    f = getattr(m, '__file__', None) or ''
    if f.startswith(root):
        names.add(f[len(root):].split('/')[0])
norm = lambda s: s.lower().replace('_', '-')
tops = {norm(n.split('.')[0]) for n in names}
for entry in os.listdir(root):
    if entry.endswith(('.dist-info', '.egg-info')) and norm(entry.split('-')[0]) in tops:
        names.add(entry)
print('\n'.join(sorted(names)))
)";

// Links each name the script printed (one a line) from Debian's dist-packages into `site_dir`; returns how
// many.
inline int link_dask_closure(const std::string& names, const std::filesystem::path& site_dir) {
  int linked = 0;
  std::string::size_type at = 0;
  while (at < names.size()) {
    auto end = names.find('\n', at);
    if (end == std::string::npos) end = names.size();
    const auto name = names.substr(at, end - at);
    at = end + 1;
    if (name.empty()) continue;
    std::filesystem::create_symlink(std::filesystem::path("/usr/lib/python3/dist-packages") / name, site_dir / name);
    ++linked;
  }
  return linked;
}

}  // namespace ferry::test
