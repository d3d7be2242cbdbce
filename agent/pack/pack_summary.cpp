#include "agent/pack/pack_summary.hpp"

#include "agent/cli/plural.hpp"
#include "agent/cli/progress_bar.hpp"
#include "packaging/import_names.hpp"
#include "packaging/python_imports.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <iterator>

namespace ferry::agent {
namespace {

// How many of the largest layers the summary names: enough to see what dominates, one line's worth.
constexpr std::size_t largest_shown = 3;

const packaging::root_spec* root_of(const std::vector<packaging::root_spec>& roots, std::size_t index) {
  for (const auto& r : roots)
    if (r.index == index) return &r;
  return nullptr;
}

bool imports_any(const std::vector<std::string>& imported, const std::vector<std::string>& names) {
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return std::binary_search(imported.begin(), imported.end(), n); });
}

}  // namespace

bool first_pack(const pack_outcome& packed) {
  return packed.layers_present == 0 && !packed.report.manifest_present && packed.report.uploaded_shards > 0;
}

shipped_summary summarise_shipped(const packaging::pack_report& r, const std::vector<packaging::root_spec>& roots,
                                  const std::vector<std::string>& workspace_imports, bool in_venv) {
  shipped_summary s;
  std::vector<const packaging::layer*> by_size;
  for (const auto& l : r.layers) {
    if (!l.packed) continue;
    const auto& layer = *l.packed;
    ++s.layers;
    s.bytes += layer.bytes;
    by_size.push_back(&layer);
    const auto* root = root_of(roots, layer.root_index);
    if (!root || root->type != packaging::root_spec::kind::site_packages) continue;
    ++s.site_layers;
    const auto dir = root->path.string();
    if (std::find(s.site_dirs.begin(), s.site_dirs.end(), dir) == s.site_dirs.end()) s.site_dirs.push_back(dir);
    if (imports_any(workspace_imports, packaging::import_names_of(layer).modules)) continue;
    ++s.unimported;
    s.unimported_bytes += layer.bytes;
  }
  const auto shown = std::min(largest_shown, by_size.size());
  std::partial_sort(by_size.begin(), by_size.begin() + static_cast<std::ptrdiff_t>(shown), by_size.end(),
                    [](auto* a, auto* b) { return a->bytes > b->bytes; });
  for (std::size_t i = 0; i < shown; ++i) s.largest.emplace_back(by_size[i]->name, by_size[i]->bytes);
  s.advise_venv = !in_venv && 2 * s.unimported > s.site_layers && 2 * s.unimported_bytes > s.bytes;
  return s;
}

std::vector<std::string> shipped_lines(const shipped_summary& s) {
  std::vector<std::string> largest;
  for (const auto& [name, bytes] : s.largest) largest.push_back(fmt::format("{} {}", name, human_bytes(bytes)));
  std::vector<std::string> out;
  out.push_back(fmt::format("first pack of this project: {} in {}{}", human_bytes(s.bytes), counted(s.layers, "layer"),
                            largest.empty() ? std::string() : fmt::format("; largest: {}", fmt::join(largest, ", "))));
  if (s.advise_venv) {
    out.push_back(fmt::format(
        "{} of the {} shipped from {} ({}) are imported by no file of the workspace: a venv with only what the "
        "project needs ships less (packaging.python = \".venv/bin/python\")",
        s.unimported, counted(s.site_layers, "package"), fmt::join(s.site_dirs, ", "),
        human_bytes(s.unimported_bytes)));
  }
  return out;
}

bool runs_in_venv(const packaging::discovery& found) {
  std::error_code ec;
  return !found.executable.empty() &&
         std::filesystem::exists(found.executable.parent_path().parent_path() / "pyvenv.cfg", ec);
}

boost::asio::awaitable<std::vector<std::string>> workspace_imports(net::cpu_pool& cpu, const pack_outcome& packed) {
  co_return co_await net::offload(cpu, [&packed] {
    std::vector<std::string> names;
    for (const auto& l : packed.report.layers) {
      if (!l.packed) continue;
      const auto* root = root_of(packed.roots, l.packed->root_index);
      if (!root || root->type != packaging::root_spec::kind::workspace) continue;
      for (const auto& f : l.packed->files) {
        if (f.type != packaging::file_entry::kind::regular || !f.path.ends_with(".py")) continue;
        std::ifstream in(f.source.empty() ? (root->path / f.path).string() : f.source, std::ios::binary);
        const std::string text((std::istreambuf_iterator<char>(in)), {});
        auto found = packaging::imported_names(text);
        names.insert(names.end(), std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()));
      }
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
  });
}

boost::asio::awaitable<void> say_first_pack(const command_context& ctx, const pack_outcome& packed) {
  if (ctx.options.verbosity < 0 || !first_pack(packed)) co_return;
  const auto imports = co_await workspace_imports(ctx.cpu, packed);
  const auto summary = summarise_shipped(packed.report, packed.roots, imports, runs_in_venv(packed.found));
  for (const auto& line : shipped_lines(summary)) fmt::print(stderr, "ferry: {}\n", line);
}

}  // namespace ferry::agent
