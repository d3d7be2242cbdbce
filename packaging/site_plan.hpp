#pragma once
// How the node's Python sees the local environment: the local sys.path entry for entry, each shipped
// directory replaced by its layers; the `.pth` lines that `site` executed locally, each from its layer, in
// the local order; and where each shipped directory went, so that paths an editable install holds can
// be pointed at the node's copy. Sans-io: from what discovery found and what the scan made of it. The node
// program writes it down (agent/node/site_file.hpp) and the import hook applies it at start-up.
#include "packaging/discovery.hpp"
#include "packaging/layer.hpp"
#include "packaging/layer_scan.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace ferry::packaging {

struct site_slot {
  enum class kind {
    layers,     // a shipped directory: its layers (a site-packages directory has one per distribution)
    stdlib,     // the interpreter's own library: the node's, where the local one stood
    node_site,  // site-packages left to the node (packaging.ship_site_packages = false): the node's own
    raw,        // a string that names nothing shipped, kept as it is (Python skips what does not exist)
  };
  kind what = kind::raw;
  std::vector<std::size_t> layers;  // indexes into the scan's layers, for kind::layers
  std::string raw;                  // the entry as sys.path held it here (what kind::raw keeps)

  bool operator==(const site_slot&) const = default;
};

struct site_import {
  std::size_t layer = 0;  // the layer that holds the .pth file
  std::string file;       // its name, for messages
  std::string line;       // as the file holds it

  bool operator==(const site_import&) const = default;
};

struct site_dir {
  std::string local;      // an absolute directory on this machine
  std::size_t layer = 0;  // the layer it became

  bool operator==(const site_dir&) const = default;
};

struct site_plan {
  std::vector<site_slot> path;        // after the script's directory, which Python puts first itself
  std::vector<site_import> imports;   // in the order `site` ran them here
  std::vector<site_dir> dirs;         // the workspace and every other shipped directory, off the path too
  bool hide_node_site = false;        // site-packages ship: the node's own must not show
  std::vector<std::string> warnings;  // a .pth line whose file no layer holds
};

site_plan plan_site(const discovery& found, std::span<const root_spec> roots, std::span<const layer> layers);

}  // namespace ferry::packaging
