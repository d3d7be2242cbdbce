#include "packaging/site_packages.hpp"

#include <cctype>
#include <vector>

namespace ferry::packaging {
namespace {

std::string_view top_component(std::string_view path) { return path.substr(0, path.find('/')); }

// One RECORD line's first field (CSV: quoted when it holds a comma or a quote).
std::string first_field(std::string_view line) {
  std::string out;
  if (line.starts_with('"')) {
    for (std::size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          out.push_back('"');
          ++i;
          continue;
        }
        break;
      }
      out.push_back(line[i]);
    }
    return out;
  }
  return std::string(line.substr(0, line.find(',')));
}

}  // namespace

std::string normalize_distribution(std::string_view name) {
  std::string out;
  bool separator = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      separator = true;
      continue;
    }
    if (separator && !out.empty()) out.push_back('-');
    separator = false;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::string distribution_of_metadata_dir(std::string_view dir) {
  for (std::string_view suffix : {".dist-info", ".egg-info"}) {
    if (dir.size() > suffix.size() && dir.ends_with(suffix)) {
      const auto stem = dir.substr(0, dir.size() - suffix.size());
      // Wheels escape '-' in names as '_', so the first '-' separates name and version.
      return normalize_distribution(stem.substr(0, stem.find('-')));
    }
  }
  return {};
}

std::string top_level_stem(std::string_view name) {
  for (std::string_view suffix : {".libs", ".pth", ".egg-link"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) return std::string(name.substr(0, name.size() - suffix.size()));
  }
  // Modules: "six.py", "_cffi_backend.cpython-311-x86_64-linux-gnu.so", "foo.abi3.so": up to the first dot.
  const auto dot = name.find('.');
  return std::string(dot == 0 || dot == std::string_view::npos ? name : name.substr(0, dot));
}

template <class F>
void for_each_record_path(std::string_view record_text, F&& f) {
  std::size_t start = 0;
  while (start < record_text.size()) {
    auto end = record_text.find('\n', start);
    if (end == std::string_view::npos) end = record_text.size();
    auto line = record_text.substr(start, end - start);
    if (line.ends_with('\r')) line.remove_suffix(1);
    start = end + 1;
    std::string quoted;
    std::string_view path;
    if (line.starts_with('"')) {
      quoted = first_field(line);
      path = quoted;
    } else {
      path = line.substr(0, line.find(','));
    }
    if (path.starts_with("./")) path.remove_prefix(2);
    // Scripts and data outside site-packages ("../../bin/pip") are not in any layer here.
    if (path.empty() || path.starts_with("../") || path.starts_with('/')) continue;
    f(path);
  }
}

void distribution_index::add_record(std::string_view dist_info_dir, std::string_view record_text) {
  auto dist = distribution_of_metadata_dir(dist_info_dir);
  if (dist.empty()) return;
  for_each_record_path(record_text, [&](std::string_view path) {
    const auto top = top_component(path);
    auto it = top_owner_.find(top);
    if (it == top_owner_.end()) {
      top_owner_.emplace(std::string(top), dist);
    } else if (it->second != dist) {
      it->second.clear();  // a namespace shared by several distributions
    }
  });
  dists_.insert(dist);
  records_.emplace_back(std::move(dist), std::string(record_text));
  indexed_ = false;
}

void distribution_index::index_shared_tops() const {
  owner_.clear();
  for (const auto& [dist, text] : records_) {
    for_each_record_path(text, [&](std::string_view path) {
      const auto it = top_owner_.find(top_component(path));
      if (it != top_owner_.end() && it->second.empty()) owner_[std::string(path)] = dist;
    });
  }
  indexed_ = true;
}

std::string distribution_index::group_of(std::string_view path) const {
  const auto top = top_component(path);
  if (auto it = top_owner_.find(top); it != top_owner_.end()) {
    if (!it->second.empty()) return it->second;
    if (!indexed_) index_shared_tops();
    if (auto owned = owner_.find(path); owned != owner_.end()) return owned->second;
  }
  if (auto dist = distribution_of_metadata_dir(top); !dist.empty()) return dist;
  // "zope.interface-5.5.2-nspkg.pth" (a RECORD would have listed it): its line makes <sitedir>/zope a
  // namespace package, so it must share a layer with that directory's files. It goes where they go when a
  // distribution names the directory (two eggs that both list "ruamel" leave it to no one of them), else
  // with its own distribution.
  if (constexpr std::string_view nspkg = "-nspkg.pth"; top.ends_with(nspkg)) {
    const auto ns = top.substr(0, top.find_first_of(".-"));
    if (top_owner_.contains(ns)) return group_of(std::string(ns) + "/");
    auto dist = normalize_distribution(top.substr(0, top.find('-')));
    if (dists_.contains(dist)) return dist;
  }
  auto stem = top_level_stem(top);
  // "numpy.libs" unlisted in RECORD still belongs with the "numpy" package beside it.
  if (auto it = top_owner_.find(stem); it != top_owner_.end() && !it->second.empty()) return it->second;
  return stem;
}

}  // namespace ferry::packaging
