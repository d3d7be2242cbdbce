#include "agent/node/site_file.hpp"

#include <boost/json.hpp>

namespace ferry::agent::node {

namespace json = boost::json;

std::string site_file_text(const plan_site& site, const std::function<std::string(const std::string&)>& layer_dir) {
  json::array path;
  for (const auto& e : site.path) {
    switch (e.what) {
      case site_path_entry::kind::layers: {
        json::array dirs;
        for (const auto& id : e.ids) dirs.emplace_back(layer_dir(id));
        path.push_back(json::object{{"dirs", std::move(dirs)}, {"local", e.raw}});
        break;
      }
      case site_path_entry::kind::stdlib: path.push_back(json::object{{"stdlib", true}, {"local", e.raw}}); break;
      case site_path_entry::kind::node_site:
        path.push_back(json::object{{"node_site", true}, {"local", e.raw}});
        break;
      case site_path_entry::kind::raw: path.push_back(json::object{{"raw", e.raw}, {"local", e.raw}}); break;
    }
  }
  json::array imports;
  for (const auto& i : site.imports)
    imports.push_back(json::object{{"dir", layer_dir(i.id)}, {"file", i.file}, {"line", i.line}});
  json::array dirs;
  for (const auto& d : site.dirs) dirs.push_back(json::array{json::value(d.local), json::value(layer_dir(d.id))});
  return json::serialize(json::object{{"path", std::move(path)},
                                      {"imports", std::move(imports)},
                                      {"dirs", std::move(dirs)},
                                      {"hide_node_site", site.hide_node_site}}) + "\n";
}

std::string path_map_text(const plan_site& site, const std::function<std::string(const std::string&)>& layer_dir) {
  json::object map;
  // The shipped directories first: a workspace is also a path entry, and its own name is the one to show.
  for (const auto& d : site.dirs) map.emplace(layer_dir(d.id), d.local);
  for (const auto& e : site.path)
    if (e.what == site_path_entry::kind::layers && !e.raw.empty())
      for (const auto& id : e.ids) map.emplace(layer_dir(id), e.raw);
  return json::serialize(map) + "\n";
}

}  // namespace ferry::agent::node
