#include "packaging/manifest.hpp"

#include "net/digest.hpp"
#include "packaging/layer.hpp"

#include <boost/json.hpp>

namespace ferry::packaging {
namespace {

namespace json = boost::json;

std::string_view kind_name(root_spec::kind k) {
  switch (k) {
    case root_spec::kind::workspace: return "workspace";
    case root_spec::kind::site_packages: return "site-packages";
    case root_spec::kind::other: return "path";
  }
  return "path";
}

// Both texts from one builder, so the body can only ever be the content text plus the digests.
std::string manifest_text(const python_info& python, std::span<const root_spec> roots, std::span<const layer> layers,
                          std::string_view prefix, const shard_digests* digests) {
  // boost::json::object keeps insertion order, so the text is the same for the same inputs.
  json::object doc;
  doc["format"] = "ferry-manifest-v1";
  doc["python"] = json::object{{"version", python.version}, {"platform", python.platform}};
  json::array roots_out;
  for (const auto& r : roots) {
    roots_out.push_back(json::object{{"index", r.index}, {"kind", kind_name(r.type)}, {"path", r.path.string()}});
  }
  doc["roots"] = std::move(roots_out);
  json::array layers_out;
  for (const auto& l : layers) {
    json::array shards;
    for (const auto& s : l.shards) {
      json::object shard{{"id", net::to_hex(s.id)}, {"key", shard_key(prefix, s)}, {"files", s.count},
                         {"bytes", s.bytes}};
      if (digests) {
        const auto& d = digests->at(s.id);
        shard["sha256"] = net::to_hex(d.sha256);
        shard["zip_bytes"] = d.zip_bytes;
      }
      shards.push_back(std::move(shard));
    }
    layers_out.push_back(json::object{{"name", l.name}, {"root", l.root_index}, {"id", net::to_hex(l.id)},
                                      {"files", l.files.size()}, {"bytes", l.bytes}, {"shards", std::move(shards)}});
  }
  doc["layers"] = std::move(layers_out);
  return json::serialize(doc);
}

}  // namespace

std::string manifest_content_json(const python_info& python, std::span<const root_spec> roots,
                                  std::span<const layer> layers, std::string_view prefix) {
  return manifest_text(python, roots, layers, prefix, nullptr);
}

std::string manifest_json(const python_info& python, std::span<const root_spec> roots, std::span<const layer> layers,
                          std::string_view prefix, const shard_digests& digests) {
  return manifest_text(python, roots, layers, prefix, &digests);
}

std::string manifest_key(std::string_view prefix, std::string_view content_text) {
  auto key = key_prefix(prefix);
  key.append("manifests/");
  key.append(net::hex_sha256(content_text));
  key.append(".json");
  return key;
}

}  // namespace ferry::packaging
