#include "packaging/import_names.hpp"

#include "packaging/site_packages.hpp"

#include <algorithm>

namespace ferry::packaging {
namespace {

// Well-formed UTF-8 (no overlong forms or surrogates are checked for: Python would refuse those names
// anyway, and a name too many only costs a wait).
bool utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > text.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return false;
    i += n;
  }
  return true;
}

bool identifier(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9') || !utf8(name)) return false;
  // Non-ASCII identifiers are valid Python (PEP 3131): their UTF-8 bytes are let through.
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return c == '_' || c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  });
}

// A module file at the top of the layer: "six.py", "x.pyc", "_x.cpython-311-x86_64-linux-gnu.so", "x.pyd".
std::string_view module_file(std::string_view file) {
  for (std::string_view ext : {".py", ".pyc", ".so", ".pyd", ".pyw"}) {
    if (!file.ends_with(ext)) continue;
    return file.substr(0, file.find('.'));
  }
  return {};
}

void sort_unique(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

std::string normalise_distribution(std::string_view name) {
  auto out = normalize_distribution(name);  // PEP 503's form: runs of '-', '_' and '.' as one '-'
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

import_names import_names_of(const layer& l) {
  import_names out;
  std::string_view last;
  for (const auto& f : l.files) {
    const std::string_view path(f.path);
    const auto slash = path.find('/');
    const auto top = path.substr(0, slash);
    if (top == last) continue;  // files are sorted: a directory's files come together
    last = top;
    if (auto dist = distribution_of_metadata_dir(top); !dist.empty()) {
      std::replace(dist.begin(), dist.end(), '-', '_');  // importlib.metadata's form
      out.dists.push_back(std::move(dist));
      continue;
    }
    if (slash != std::string_view::npos) {
      if (identifier(top) && top != "__pycache__") out.modules.emplace_back(top);
      continue;
    }
    if (auto m = module_file(top); identifier(m)) out.modules.emplace_back(m);
  }
  sort_unique(out.modules);
  sort_unique(out.dists);
  return out;
}

}  // namespace ferry::packaging
