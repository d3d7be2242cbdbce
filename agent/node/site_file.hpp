#pragma once
// The site file: a plan's site (plan.hpp) as the import hook reads it, every layer id made that layer's
// directory on this node. The node program writes it with install_content (content_dir.hpp) under
// <cache>/site/ and says where; the command finds it in FERRY_SITE, and the path map in the same
// directory (paths.json) in FERRY_PATH_MAP.
//
//   {"path": [{"dirs": [DIR...]} | {"stdlib": true} | {"node_site": true} | {"raw": TEXT}, ...],
//             (each also with "local": the workstation's entry it stands for)
//    "imports": [{"dir": DIR, "file": NAME, "line": "import ..."}, ...],
//    "dirs": [[LOCAL, DIR], ...], "hide_node_site": BOOL}
#include "agent/node/plan.hpp"

#include <functional>
#include <string>

namespace ferry::agent::node {

std::string site_file_text(const plan_site& site, const std::function<std::string(const std::string&)>& layer_dir);

// The path map beside it (paths.json, FERRY_PATH_MAP in the command's environment): which workstation
// directory each layer's directory stands for, so that what the command prints (a traceback) can name the
// workstation's files: {"DIR": "LOCAL", ...}. A shipped directory maps to itself; each layer of a
// site-packages directory (one per distribution) maps to that directory.
std::string path_map_text(const plan_site& site, const std::function<std::string(const std::string&)>& layer_dir);

}  // namespace ferry::agent::node
