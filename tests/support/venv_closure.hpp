#pragma once
// A venv that holds some of Debian's packages as an installed one would: links into Debian's dist-packages
// for every top-level package (with its metadata directory) that importing them loads. Dask's (distributed,
// its scheduler, worker and nanny) for the cluster tests and bench, eliot for a traced program: ferry ships
// the venv's site-packages, and the node's own are hidden, so the nodes run them from the shipped layers.
#include <filesystem>
#include <string>

namespace ferry::test {

// The program that prints, one a line, what importing `modules` (an import statement's names) loads from
// Debian's dist-packages.
inline std::string closure_script(const std::string& modules) {
  // What Debian's own .pth files loaded at start-up (_distutils_hack) is not theirs.
  return "import sys, os\nbefore = set(sys.modules)\nimport " + modules + "\n" + R"(root = '/usr/lib/python3/dist-packages/'
names = set()
for k, m in list(sys.modules.items()):
    f = (getattr(m, '__file__', None) or '') if k not in before else ''
    if f.startswith(root):
        names.add(f[len(root):].split('/')[0])
norm = lambda s: s.lower().replace('_', '-')
tops = {norm(n.split('.')[0]) for n in names}
for entry in os.listdir(root):
    if entry.endswith(('.dist-info', '.egg-info', '-nspkg.pth')) and norm(entry.split('-')[0].split('.')[0]) in tops:
        names.add(entry)
print('\n'.join(sorted(names)))
)";
}

inline const std::string dask_closure_script =
    closure_script("distributed, distributed.cli.dask_scheduler, distributed.cli.dask_worker, distributed.nanny");

// Links each name the script printed (one a line) from Debian's dist-packages into `site_dir`; returns how
// many.
inline int link_closure(const std::string& names, const std::filesystem::path& site_dir) {
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
