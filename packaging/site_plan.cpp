#include "packaging/site_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace ferry::packaging {
namespace {

using entry_kind = discovery_entry::kind;

std::optional<std::size_t> root_of(std::span<const root_spec> roots, const discovery_entry& e) {
  for (const auto& r : roots)
    if (r.path == e.path) return r.index;
  return std::nullopt;
}

std::vector<std::size_t> layers_of(std::span<const layer> layers, std::size_t root) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (layers[i].root_index == root) out.push_back(i);
  return out;
}

site_slot slot_of(const discovery& found, std::span<const root_spec> roots, std::span<const layer> layers,
                  const path_slot& p) {
  if (!p.entry) return {site_slot::kind::raw, {}, p.raw};
  const auto& e = found.entries[*p.entry];
  if (e.what == entry_kind::stdlib) return {site_slot::kind::stdlib, {}, p.raw};
  if (e.what == entry_kind::skipped_site_packages) return {site_slot::kind::node_site, {}, p.raw};
  const auto root = e.shipped() ? root_of(roots, e) : std::nullopt;
  if (!root) return {site_slot::kind::raw, {}, p.raw};  // missing, or a zip file that was not packed
  return {site_slot::kind::layers, layers_of(layers, *root), p.raw};
}

// The layer of `root` that holds the top-level file `name`.
std::optional<std::size_t> holder(std::span<const layer> layers, std::size_t root, const std::string& name) {
  for (const auto i : layers_of(layers, root)) {
    const auto& files = layers[i].files;
    const bool has = std::any_of(files.begin(), files.end(), [&](const file_entry& f) { return f.path == name; });
    if (has) return i;
  }
  return std::nullopt;
}

}  // namespace

site_plan plan_site(const discovery& found, std::span<const root_spec> roots, std::span<const layer> layers) {
  site_plan out;
  for (const auto& p : found.sys_path) out.path.push_back(slot_of(found, roots, layers, p));
  for (const auto& e : found.entries) {
    if (e.what == entry_kind::site_packages) out.hide_node_site = true;
    if (e.what != entry_kind::workspace && e.what != entry_kind::other) continue;
    const auto root = root_of(roots, e);
    const auto held = root ? layers_of(layers, *root) : std::vector<std::size_t>{};
    if (held.empty()) continue;
    // An editable finder may hold either spelling of the directory.
    out.dirs.push_back({e.path.string(), held.front()});
    if (e.real_path != e.path) out.dirs.push_back({e.real_path.string(), held.front()});
  }
  for (const auto& pth : found.pth) {
    if (pth.imports.empty()) continue;
    const auto entry = std::find_if(found.entries.begin(), found.entries.end(), [&](const discovery_entry& e) {
      error_code ec;
      return e.what == entry_kind::site_packages &&
             (e.path == pth.dir || e.real_path == std::filesystem::weakly_canonical(pth.dir, ec));
    });
    const auto root = entry != found.entries.end() ? root_of(roots, *entry) : std::nullopt;
    const auto at = root ? holder(layers, *root, pth.name) : std::nullopt;
    if (!at) {
      // Left to the node's site (not shipped), or a file the scan left out.
      if (entry != found.entries.end())
        out.warnings.push_back(fmt::format("{}/{}: no layer holds this .pth file; its import lines do not run on nodes",
                                           pth.dir, pth.name));
      continue;
    }
    for (const auto& line : pth.imports) out.imports.push_back({*at, pth.name, line});
  }
  return out;
}

}  // namespace ferry::packaging
