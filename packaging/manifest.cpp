#include "packaging/manifest.hpp"

#include "net/digest.hpp"
#include "packaging/layer.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

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
                          std::string_view prefix, zip_codec codec, const shard_digests* digests) {
  // boost::json::object keeps insertion order, so the text is the same for the same inputs.
  json::object doc;
  doc["format"] = "ferry-manifest-v1";
  json::object py{{"version", python.version}, {"platform", python.platform}};
  if (!python.implementation.empty()) {
    py["implementation"] = python.implementation;
    py["machine"] = python.machine;
    py["abi"] = python.abi;
  }
  if (!python.glibc.empty()) {
    py["glibc"] = python.glibc;
    py["glibc_by"] = json::value_from(python.glibc_by);
  }
  doc["python"] = std::move(py);
  json::array roots_out;
  for (const auto& r : roots) {
    roots_out.push_back(json::object{{"index", r.index}, {"kind", kind_name(r.type)}, {"path", r.path.string()}});
  }
  doc["roots"] = std::move(roots_out);
  json::array layers_out;
  for (const auto& l : layers) {
    json::array shards;
    for (const auto& s : l.shards) {
      json::object shard{{"id", net::to_hex(s.id)}, {"key", shard_key(prefix, s, codec)}, {"files", s.count},
                         {"bytes", s.bytes}};
      if (s.piece) {
        const auto& piece = l.files_of(s).front();
        shard["piece"] = json::object{{"path", piece.path}, {"offset", piece.piece_offset}, {"file_size", piece.key.size}};
      }
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

std::pair<int, int> glibc_version(std::string_view text) {
  int major = 0, minor = 0;
  const auto dot = text.find('.');
  if (dot == std::string_view::npos) return {0, 0};
  const auto a = std::from_chars(text.data(), text.data() + dot, major);
  const auto b = std::from_chars(text.data() + dot + 1, text.data() + text.size(), minor);
  if (a.ec != std::errc() || b.ec != std::errc() || a.ptr != text.data() + dot || b.ptr != text.data() + text.size())
    return {0, 0};
  return {major, minor};
}

python_info python_info_of(const discovery& found) {
  python_info p{found.version, found.platform_tag, found.executable.string()};
  p.implementation = found.implementation;
  p.machine = found.machine;
  p.abi = found.soabi;
  // Only what ships counts: site-packages left to the node are the node's own business.
  const bool ships_site = std::any_of(found.entries.begin(), found.entries.end(), [](const discovery_entry& e) {
    return e.what == discovery_entry::kind::site_packages;
  });
  if (!ships_site) return p;
  std::pair<int, int> newest{0, 0};
  for (const auto& [dist, version] : found.wheel_glibc) newest = std::max(newest, glibc_version(version));
  if (newest == std::pair<int, int>{0, 0}) return p;
  p.glibc = fmt::format("{}.{}", newest.first, newest.second);
  for (const auto& [dist, version] : found.wheel_glibc)
    if (glibc_version(version) == newest) p.glibc_by.push_back(dist);
  return p;
}

std::string manifest_content_json(const python_info& python, std::span<const root_spec> roots,
                                  std::span<const layer> layers, std::string_view prefix, zip_codec codec) {
  return manifest_text(python, roots, layers, prefix, codec, nullptr);
}

std::string manifest_json(const python_info& python, std::span<const root_spec> roots, std::span<const layer> layers,
                          std::string_view prefix, zip_codec codec, const shard_digests& digests) {
  return manifest_text(python, roots, layers, prefix, codec, &digests);
}

std::string manifest_key(std::string_view prefix, std::string_view content_text) {
  auto key = key_prefix(prefix);
  key.append("manifests/");
  key.append(net::hex_sha256(content_text));
  key.append(".json");
  return key;
}

}  // namespace ferry::packaging
