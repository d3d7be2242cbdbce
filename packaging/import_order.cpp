#include "packaging/import_order.hpp"

#include "net/digest.hpp"
#include "packaging/git_config.hpp"
#include "packaging/layer.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

namespace ferry::packaging {

namespace json = boost::json;

std::string project_id(const std::filesystem::path& workspace) {
  std::string identity = "path:" + workspace.string();
  std::ifstream in(workspace / ".git" / "config", std::ios::binary);
  if (in) {
    std::ostringstream text;
    text << in.rdbuf();
    for (const auto& e : parse_git_config(text.str())) {
      if (e.name == "remote.origin.url" && e.value && !e.value->empty()) identity = "git:" + *e.value;
    }
  }
  return net::hex_sha256(identity).substr(0, 32);
}

std::string import_order_key(std::string_view prefix, std::string_view project) {
  return key_prefix(prefix) + "import-orders/" + std::string(project) + ".json";
}

std::string import_order_json(const std::vector<std::string>& layers) {
  json::array list(layers.begin(), layers.end());
  return json::serialize(json::object{{"layers", std::move(list)}});
}

std::vector<std::string> parse_import_order(std::string_view text) {
  std::vector<std::string> out;
  json::error_code ec;
  const auto doc = json::parse(text, ec);
  if (ec || !doc.is_object()) return out;
  const auto* layers = doc.get_object().if_contains("layers");
  if (!layers || !layers->is_array()) return out;
  std::set<std::string> seen;
  for (const auto& v : layers->get_array()) {
    if (!v.is_string() || v.get_string().empty() || v.get_string().size() > 4096) continue;
    std::string name(v.get_string());
    if (seen.insert(name).second) out.push_back(std::move(name));
    if (out.size() >= 100'000) break;
  }
  return out;
}

std::vector<std::string> merge_import_order(const std::vector<std::string>& now,
                                            const std::vector<std::string>& before) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto* list : {&now, &before})
    for (const auto& name : *list)
      if (seen.insert(name).second) out.push_back(name);
  return out;
}

std::vector<std::size_t> layer_ranks(const scan_result& scan, std::span<const root_spec> roots,
                                     const std::vector<std::string>& order) {
  std::map<std::string, std::size_t, std::less<>> position;
  for (std::size_t i = 0; i < order.size(); ++i) position.emplace(order[i], i);
  auto workspace = [&](const layer& l) {
    for (const auto& r : roots)
      if (r.index == l.root_index) return r.type == root_spec::kind::workspace;
    return false;
  };
  struct key {
    int group;              // 0 the workspace, 1 imported before, 2 the rest
    std::size_t place;      // within the group
    std::uint64_t bytes;    // the rest: largest first
    std::size_t index;
  };
  std::vector<key> keys;
  for (std::size_t i = 0; i < scan.layers.size(); ++i) {
    const auto& l = scan.layers[i];
    if (workspace(l)) {
      keys.push_back({0, i, 0, i});
    } else if (auto it = position.find(l.name); it != position.end()) {
      keys.push_back({1, it->second, 0, i});
    } else {
      keys.push_back({2, 0, l.bytes, i});
    }
  }
  std::sort(keys.begin(), keys.end(), [](const key& a, const key& b) {
    if (a.group != b.group) return a.group < b.group;
    if (a.place != b.place) return a.place < b.place;
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.index < b.index;
  });
  std::vector<std::size_t> rank(keys.size());
  for (std::size_t r = 0; r < keys.size(); ++r) rank[keys[r].index] = r;
  return rank;
}

}  // namespace ferry::packaging
