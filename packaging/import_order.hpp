#pragma once
// The order in which a project's runs imported its layers, kept in storage beside the manifests
// (PREFIX/import-orders/<project>.json), so that the next pack uploads, and every node fetches, the
// layers a program needs first before the rest: the workspace, then the layers in the order runs first
// imported them, then the ones no run imported, largest first. It is keyed by the project, not by the
// manifest, so a changed dependency keeps its place and a colleague's first run benefits too: the project
// is its git remote `origin` when it has one, else the workspace directory's absolute path.
#include "packaging/layer_scan.hpp"

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::packaging {

// 32 hex digits naming the project of `workspace`.
std::string project_id(const std::filesystem::path& workspace);
std::string import_order_key(std::string_view prefix, std::string_view project);

// {"layers": [names...]}; a text that is not that reads as no order (it is a hint, never a reason to fail).
std::string import_order_json(const std::vector<std::string>& layers);
std::vector<std::string> parse_import_order(std::string_view text);

// This run's order first, then what earlier runs imported that this one did not.
std::vector<std::string> merge_import_order(const std::vector<std::string>& now,
                                            const std::vector<std::string>& before);

// Each layer's place in the order of arrival (0 first; a permutation of the layers' indexes): the
// workspace root's layers, then those `order` names, by the order's position, then the rest, largest first.
std::vector<std::size_t> layer_ranks(const scan_result& scan, std::span<const root_spec> roots,
                                     const std::vector<std::string>& order);

}  // namespace ferry::packaging
